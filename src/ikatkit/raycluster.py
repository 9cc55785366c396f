"""Ray for work that outgrows one process: a local Ray on this machine by default, a cluster by address.

Local Ray binds to loopback only, starts no dashboard and sends no usage statistics. A Ray already started in
this process (a test session, a notebook) is reused as it is.
"""

from __future__ import annotations

import os
from typing import Any

from ikatkit.errors import IkatError

LOCAL_OBJECT_STORE = 1 << 30  # bytes: Ray Data streams, so a small store bounds memory without slowing it


def connect(address: str | None = None, num_cpus: int | None = None) -> Any:
    """The ``ray`` module, initialised: ``address`` None starts a local Ray with ``num_cpus`` (default: the
    cores this process may use); ``auto`` or ``HOST:PORT`` (``ray://HOST:PORT``) joins a running cluster."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return ray
    try:
        if address is None:
            ray.init(num_cpus=num_cpus or len(os.sched_getaffinity(0)), include_dashboard=False,
                     _node_ip_address="127.0.0.1", object_store_memory=LOCAL_OBJECT_STORE,
                     configure_logging=False, log_to_driver=False)
        else:
            ray.init(address=address, include_dashboard=False, configure_logging=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise IkatError(f"cannot start or join Ray at {address or 'this machine'}: {err}",
                        fix="start the cluster with `ray start --head` (and `ray start --address HEAD:6379` on "
                            "each worker), then pass --ray auto on a node of it or --ray HEAD:6379") from None
    return ray


def resources(ray: Any) -> tuple[int, int]:
    """The cluster's (CPUs, GPUs)."""
    total = ray.cluster_resources()
    return int(total.get("CPU", 0)), int(total.get("GPU", 0))
