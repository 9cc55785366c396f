"""The digests of ikatkit, one place: files, folders (models, adapters; memoized on disk by path, size and mtime),
canonical JSON (cache keys, fingerprints) and models (a digest of the weights and of everything else that changes
their outputs). Hashes that are data rather than identities stay with their formats: the embedding cache's text
keys, the duplicate finder's id hashes, the official md5 of a passage (``index verify``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_text

CHUNK = 1 << 20


def canonical_json(data: Any, *, ascii_only: bool = False) -> str:
    """``data`` as JSON with sorted keys, values JSON lacks as ``str()``; ``ascii_only`` escapes non-ASCII characters
    (the model identities and Agent-R's selector fingerprint always did: their stored digests stay valid)."""
    return json.dumps(data, sort_keys=True, ensure_ascii=ascii_only, default=str)


def json_hasher(data: Any, *, ascii_only: bool = False) -> Any:
    """A sha256 object fed :func:`canonical_json` of ``data``, to feed more (e.g. a model's weights)."""
    return hashlib.sha256(canonical_json(data, ascii_only=ascii_only).encode())


def json_digest(data: Any, *, ascii_only: bool = False) -> str:
    """sha256 (hex) of :func:`canonical_json` of ``data``."""
    return json_hasher(data, ascii_only=ascii_only).hexdigest()


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


def model_digest(network: Any, *extra: Any) -> str:
    """sha256 of ``network``'s weights (names and bytes, in order) and the canonical JSON of ``extra``
    (configs, library versions): a model's identity for caches."""
    import torch

    digest = json_hasher(extra, ascii_only=True)
    for name, tensor in network.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()
