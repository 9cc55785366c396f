"""One writer per output: an ``flock`` on a lock file, which the kernel frees when its holder dies.

``run`` and ``interactive`` hold ``OUT/run.lock`` (:func:`run_lock`); ``index build`` holds ``.OUT.lock`` beside the
index folder. A stale lock file (its holder killed outright) is simply taken; a live holder is named in the error.
The file is removed however the holder ends (finished, failed, stopped), while still locked; a process that locked
the removed file in between sees that it is no longer the lock file and takes the new one.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from ikatkit.errors import IkatError


@contextmanager
def locked(path: Path, refused: str, *, where: Path, fix: str) -> Iterator[None]:
    """Hold ``path`` (with this process's id and host in it); if another process holds it, raise ``IkatError``
    with ``refused`` (``{holder}`` is replaced by what the holder wrote) about ``where``."""
    while True:
        handle = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise IkatError(refused.format(holder=holder), path=where, fix=fix) from None
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()  # locked a file its holder removed as it ended: lock the current one
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        yield
    finally:
        path.unlink(missing_ok=True)
        handle.close()


@contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold ``out/run.lock`` while a run writes ``out``; refuse if another process holds it. A folder made here is
    removed again if the run left nothing in it (a wrong input found after the lock: no empty folder behind)."""
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        with locked(out / "run.lock", "another run is writing this folder ({holder})", where=out,
                    fix="wait for it to end, or stop it; --restart does not override a live run"):
            yield
    finally:
        if made and not any(p.is_file() or p.is_symlink() for p in out.rglob("*")):
            shutil.rmtree(out, ignore_errors=True)  # empty folders only


def index_lock(out: Path) -> AbstractContextManager[None]:
    """Hold ``.NAME.lock`` beside the index folder ``out`` while a build writes it; refuse if another holds it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return locked(out.parent / f".{out.name}.lock", "another build ({holder}) is writing this index", where=out,
                  fix="wait for it to end, or stop it")
