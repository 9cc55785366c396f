"""Index manifests: one writer and one reader (the kinds, their names and manifest files:
:mod:`ikatkit.index.kinds`' records).

Every index ikatkit builds says what it is in one JSON file written last (a folder without it is unfinished):
``manifest.json`` (``partitions.json`` for a partitioned index), with the keys every kind shares — ``kind``,
``counts``, ``source`` (or a Lucene index's ``sources``), ``parameters``, ``placement`` (where its encoder actors
ran), ``versions``, ``seconds``, ``built`` — beside the kind's own. Indexes built before manifests named their kind
(a Lucene index's ``manifest.json``, ``partitions.json``) are read as the kind they are.

What a folder is, and the searcher and texts it builds, is :func:`ikatkit.artifact.open_index`'s.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_json
from ikatkit.errors import IkatError
from ikatkit.index.kinds import (BM25, DENSE, INDEX_KINDS, MANIFEST, PARTITIONS, PARTITIONS_FILE, SPARSE, SPARSE_HDF5,
                                 described, manifest_files)

__all__ = ["BM25", "DENSE", "MANIFEST", "PARTITIONS", "PARTITIONS_FILE", "SPARSE", "SPARSE_HDF5", "finished",
           "manifest_file", "read_manifest", "write_manifest", "wrong_kind"]  # the kind names: ikatkit.index.kinds'


def manifest_file(folder: str | Path, kind: str) -> Path:
    """Where the manifest of a ``kind`` index in ``folder`` is written."""
    return Path(folder) / INDEX_KINDS[kind].manifest


def write_manifest(out: str | Path, kind: str, started: float, *, counts: dict[str, int], parameters: dict[str, Any],
                   source: Any = None, placement: dict[str, Any] | None = None,
                   versions: tuple[str, ...] = (), **fields: Any) -> dict[str, Any]:
    """Write the manifest of a finished ``kind`` index into ``out`` (atomically, last) and return it: the shared keys,
    the kind's own ``fields``, and ``versions`` of ikatkit and the named packages; ``started``: ``time.time()`` when
    the job began."""
    if kind not in INDEX_KINDS or not INDEX_KINDS[kind].own:
        raise ValueError(f"unknown index kind {kind!r}")
    manifest = {"kind": kind, **fields, **({} if placement is None else {"placement": placement}),
                "counts": counts, **({} if source is None else {"source": source}), "parameters": parameters,
                "versions": {name: metadata.version(name) for name in ("ikatkit", *versions)},
                "seconds": round(time.time() - started, 2),
                "built": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_json(manifest_file(out, kind), manifest)
    return manifest


def read_manifest(folder: str | Path) -> dict[str, Any] | None:
    """The manifest of the finished index in ``folder`` with its ``kind`` (that of an earlier version's manifest
    filled in), else None; one clear error for a manifest that is not JSON."""
    folder = Path(folder)
    for path, kind in ((folder / name, unnamed) for name, unnamed in manifest_files().items()):
        if not path.is_file():
            continue
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            raise IkatError(f"unreadable index manifest ({err})", path=path,
                            fix="build the index again into a fresh folder") from None
        if not isinstance(manifest, dict):
            raise IkatError("the index manifest is not a JSON object", path=path,
                            fix="build the index again into a fresh folder")
        return {**manifest, "kind": manifest.get("kind", kind)}
    return None


def finished(out: str | Path, kind: str) -> dict[str, Any] | None:
    """The manifest of the finished ``kind`` index in ``out`` (a build then does nothing), None when there is none,
    one clear error when ``out`` holds another kind."""
    manifest = read_manifest(out)
    if manifest is None:
        return None
    if manifest["kind"] != kind:
        raise IkatError(f"this folder holds {described(manifest['kind'])}, not {described(kind)}", path=out,
                        fix="choose another --out")
    return manifest


def wrong_kind(path: str | Path, found: str, wanted: str) -> IkatError:
    """The one error for an index searched as a kind it is not: what it is, how to search it (``ikatkit search``'s
    option and a config's resource kind) and how to build the wanted kind."""
    it, want = INDEX_KINDS[found], INDEX_KINDS[wanted]
    how = f"`ikatkit search {it.option}`, or " if it.option else ""
    build = f", or build {want.description} with `{want.built_by}`" if want.own else ""
    return IkatError(f"this is {it.description}, not {want.description}", path=path,
                     fix=f"search it as what it is ({how}a resource of kind = \"{it.resource}\"){build}")
