"""Atomic file writes: a reader never sees a half-written file."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success fsync and rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    if "b" in mode:
        encoding = None
    try:
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_open(path) as handle:
        handle.write(text)


def write_json(path: str | Path, data: Any, indent: int | None = 2) -> None:
    """Write ``data`` as JSON to ``path`` atomically (UTF-8, keys in insertion order)."""
    with atomic_open(path) as handle:
        json.dump(data, handle, indent=indent, ensure_ascii=False)
        handle.write("\n")


def write_folder(path: str | Path, fill: Callable[[Path], None]) -> None:
    """Fill a temporary folder beside ``path`` with ``fill(folder)``, then put it in the place of ``path``
    (a reader sees the old folder or the new one, or for an instant none)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    old = tmp.with_suffix(".old")
    try:
        fill(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
