"""Content digests of files and folders (models, adapters), memoized on disk by path, size and mtime."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ikatkit.atomic import write_text

CHUNK = 1 << 20


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def tree_digest(path: str | Path, memo: str | Path | None = None) -> str:
    """sha256 over a file's or a folder's files (relative names and contents, in name order).

    With ``memo`` (a folder), the digest is kept under a key of every file's path, size and mtime, so a large
    model is read once until one of its files changes."""
    path = Path(path).resolve()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    names = [p.name if p == path else str(p.relative_to(path)) for p in files]
    stats = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    stamp = hashlib.sha256(json.dumps(stats).encode()).hexdigest()
    kept = Path(memo) / f"{stamp}.sha256" if memo else None
    if kept is not None and kept.exists():
        return kept.read_text().strip()
    digest = hashlib.sha256()
    for name, file in zip(names, files):
        digest.update(f"{name}\0{file_digest(file)}\n".encode())
    value = digest.hexdigest()
    if kept is not None:
        write_text(kept, value + "\n")
    return value
