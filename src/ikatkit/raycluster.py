"""Ray for work that outgrows one process: a local Ray on this machine by default, a cluster by address.

A local Ray listens on loopback only: its node address is 127.0.0.1 (as Ray does on macOS and Windows, where it
starts no multi-node cluster), so the GCS, the raylet, every worker, the driver and the runtime-env agent bind there,
not to every interface; :func:`connect` refuses to go on if Ray ever chooses otherwise. It starts no dashboard, sends
no usage statistics and keeps token authentication on (other users of the machine reach loopback too). A cluster is
only ever joined by address (``--ray HOST:PORT``), when the user asks. A Ray already started in this process (a test
session, a notebook) is reused as it is.

Ray's console chatter is not the user's to act on, so a local Ray prints none of it: not the token-authentication
notice, not its C++ processes' log lines (``RAY_BACKEND_LOG_LEVEL=fatal``: the driver's ``core_worker.cc`` errors about
Ray Data's restartable actors, the "killed by ray.kill" lines of a stopped job), not Ray Data's progress logging
(``RAY_DATA_LOG_LEVEL=ERROR``), not the workers' output (``log_to_driver``). A failure still reaches the user as the
exception that ikatkit reports. Each variable that the user set keeps the user's value (``RAY_BACKEND_LOG_LEVEL=info``
shows Ray's own lines again); Ray's logs stay in its session folder (``/tmp/ray/session_latest/logs``).

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
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from ikatkit.errors import IkatError

LOCAL_OBJECT_STORE = 1 << 30  # bytes: Ray Data streams, so a small store bounds memory without slowing it
LOOPBACK = ("127.0.0.1", "::1")
QUIET_LOCAL = {  # set for a local Ray unless the user set them (see the module docstring)
    "RAY_AUTH_MODE": "token",  # explicit: Ray's default is the same mode, announced on every start
    "RAY_BACKEND_LOG_LEVEL": "fatal",
    "RAY_DATA_LOG_LEVEL": "ERROR",
}


def connect(address: str | None = None, num_cpus: int | None = None) -> Any:
    """The ``ray`` module, initialised: ``address`` None starts a local Ray with ``num_cpus`` (default: the
    cores this process may use); ``auto`` or ``HOST:PORT`` (``ray://HOST:PORT``) joins a running cluster."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address is None:
        for name, value in QUIET_LOCAL.items():
            os.environ.setdefault(name, value)
    import ray

    if ray.is_initialized():
        return ray
    with _signal_handlers_kept(), _joined(address):
        if address is None:
            with _loopback(ray), _console_kept_quiet():
                ray.init(num_cpus=num_cpus or len(os.sched_getaffinity(0)), include_dashboard=False,
                         object_store_memory=LOCAL_OBJECT_STORE, configure_logging=False, log_to_driver=False)
        else:
            ray.init(address=address, include_dashboard=False, configure_logging=False, log_to_driver=False)
    return ray


@contextlib.contextmanager
def _console_kept_quiet() -> Iterator[None]:
    """The process's stderr (file descriptor 2) into a scratch file for the block: the one line that Ray's C++
    logging prints whenever ``RAY_BACKEND_LOG_LEVEL`` is set ("Set ray log level from environment variable") is not
    printed; if the block fails, what it printed follows on stderr, for the error it explains."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as scratch:
        os.dup2(scratch.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            scratch.seek(0)
            sys.stderr.write(scratch.read().decode("utf-8", "replace"))
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def _loopback(ray: Any) -> Iterator[None]:
    """A local Ray's node address is loopback, whatever the machine's: Ray's own rule on macOS and Windows
    (``ENABLE_RAY_CLUSTER`` false; ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, read when ray is imported), applied for
    the start whenever ray was imported; a node that still chose another address is shut down and refused."""
    from ray._private import ray_constants

    kept = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = kept
    node = ray.util.get_node_ip_address()
    if node not in LOOPBACK:
        ray.shutdown()
        raise IkatError(f"the local Ray started on {node}, not on loopback: it would listen on every interface",
                        fix="report this with your Ray version; meanwhile start Ray yourself (`ray start --head "
                            "--node-ip-address 127.0.0.1`) and pass --ray 127.0.0.1:6379")


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
