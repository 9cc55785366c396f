"""Ray for work that outgrows one process: a local Ray on this machine by default, a cluster by address.

Local Ray binds to loopback only, starts no dashboard and sends no usage statistics. A Ray already started in
this process (a test session, a notebook) is reused as it is.

Ray's core worker installs its own handlers for SIGSEGV and the other fatal signals when it connects. The JVM
that Lucene search runs in (same process) raises SIGSEGV on purpose (null checks, safepoints) and must handle it
itself: with Ray's handler in its place, the next such signal kills the process ("Fatal Python error:
Segmentation fault" inside a Lucene search). ``connect`` therefore puts back the handlers that were there before,
and Python's handlers of SIGINT and SIGTERM too (Ray's init sets one that exits with code 15): a stop stays
ikatkit's (:mod:`ikatkit.stopping`), and Ray is shut down on the way out (its ``atexit`` hook).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Iterator
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
    with _signal_handlers_kept(), _joined(address):
        if address is None:
            ray.init(num_cpus=num_cpus or len(os.sched_getaffinity(0)), include_dashboard=False,
                     _node_ip_address="127.0.0.1", object_store_memory=LOCAL_OBJECT_STORE,
                     configure_logging=False, log_to_driver=False)
        else:
            ray.init(address=address, include_dashboard=False, configure_logging=False, log_to_driver=False)
    return ray


class _Sigaction(ctypes.Structure):
    """glibc's ``struct sigaction`` (Linux): handler, mask (1024 bits), flags, restorer."""

    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


FATAL_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT)


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """The process's handlers of the fatal signals, SIGINT and SIGTERM as they were before the block (see the
    module docstring)."""
    libc = ctypes.CDLL(None, use_errno=True)
    saved = {sig: _Sigaction() for sig in FATAL_SIGNALS}
    for sig, action in saved.items():
        libc.sigaction(sig, None, ctypes.byref(action))
    main = threading.current_thread() is threading.main_thread()
    stops = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        yield
    finally:
        for sig, action in saved.items():
            libc.sigaction(sig, ctypes.byref(action), None)
        for sig, handler in stops.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _joined(address: str | None) -> Iterator[None]:
    """Ray's start-up failures as one clear error."""
    try:
        yield
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise IkatError(f"cannot start or join Ray at {address or 'this machine'}: {err}",
                        fix="start the cluster with `ray start --head` (and `ray start --address HEAD:6379` on "
                            "each worker), then pass --ray auto on a node of it or --ray HEAD:6379") from None


def resources(ray: Any) -> tuple[int, int]:
    """The cluster's (CPUs, GPUs)."""
    total = ray.cluster_resources()
    return int(total.get("CPU", 0)), int(total.get("GPU", 0))
