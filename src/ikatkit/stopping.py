"""Stopping a command on SIGINT (Ctrl-C) or SIGTERM (``kill``, a scheduler's time limit): one mechanism for all.

:func:`handling_stops` (entered by ``ikatkit``'s ``main``) puts our handler on both signals. The first signal raises
:class:`Stopped` in the main thread as soon as it runs Python again (a Lucene search, a model's forward pass or an
HTTP request in progress finishes first): the batch or turn in progress is dropped, and the ``with`` blocks on the
way out stop what the command started (Anserini, segmenter processes, llama.cpp servers, uvicorn, Ray) and remove
work folders and locks. Checkpoints and interactive state are written atomically before that, so the command
resumes where it stopped; ``main`` prints one line saying how and exits with 128 + the signal (130, 143). A second
signal ends the process at once (the signal's default action); the processes it started die with it.

Why the JVM matters here: the JVM that Lucene search runs in lives inside this process (pyjnius), and by default it
installs its own SIGINT/SIGTERM handlers, replacing Python's. A signal then started the JVM's shutdown on its own
thread, which calls the C library's ``exit`` while the main thread holds the GIL inside a JNI call; ``exit``'s
destructors (torch's) wait for the GIL and the JNI call waits for the exiting JVM: a hang (or, racing the main
thread, a corrupted heap). :mod:`ikatkit.java` starts the JVM with ``-Xrs`` so that these signals stay Python's.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []  # the signals received while handling_stops is active


class Stopped(KeyboardInterrupt):
    """Raised in the main thread by the first SIGINT or SIGTERM (a KeyboardInterrupt, so ``except Exception``
    never swallows it)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def code(self) -> int:
        """The exit code a shell expects of a process ended by this signal."""
        return 128 + self.signum


def _handle(signum: int, frame: FrameType | None) -> None:
    for each in SIGNALS:  # a second signal takes the default action: the kernel ends the process at once, even
        signal.signal(each, signal.SIG_DFL)  # one stuck in native code (its children die with it: dies_with_us)
    _received.append(signum)
    raise Stopped(signum)


def received() -> int | None:
    """The first stop signal received, if any (an error raised while stopping is reported as the stop)."""
    return _received[0] if _received else None


@contextmanager
def handling_stops() -> Iterator[None]:
    """Stop on SIGINT and SIGTERM inside the block (see the module docstring; main thread only). The previous
    handlers come back after it, unless a stop was received: then the process is ending, and a second signal
    while it ends (Ray's shutdown, say) still ends it at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _handle) for signum in SIGNALS}
    _received.clear()
    try:
        yield
    finally:
        if not _received:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def resume_command(argv: list[str]) -> str:
    """The command line that resumes ``ikatkit ARGV``: the same, without ``--restart`` (which would start over)."""
    import shlex

    return shlex.join(["ikatkit", *(arg for arg in argv if arg != "--restart")])


def dies_with_us() -> Callable[[], None]:
    """A ``preexec_fn`` that has the child killed when this process dies, even by SIGKILL (Linux
    ``PR_SET_PDEATHSIG``), rather than run on for nobody. ``prctl`` is looked up before the fork: the child of a
    threaded process (one with a JVM) must not load libraries."""
    parent = os.getpid()
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None

    def set_death_signal() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # we died before that
            os._exit(1)

    return set_death_signal
