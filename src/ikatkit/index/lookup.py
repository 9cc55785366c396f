"""Passage lookup and statistics of a built index."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.index.build import MANIFEST


def check_index(index: str | Path) -> Path:
    """The index folder, or one clear error when it is missing or unfinished."""
    path = Path(index)
    if not (path / MANIFEST).exists():
        raise IkatError("no finished index here (manifest.json missing)", path=path,
                        fix="build it with `ikatkit index build INPUT... --out DIR`")
    return path


@lru_cache(maxsize=8)
def _searcher(index: str):  # type: ignore[no-untyped-def]
    from ikatkit.java import import_pyserini

    return import_pyserini("pyserini.search.lucene").LuceneSearcher(index)


def doc(index: str | Path, pid: str) -> str | None:
    """The stored text of passage ``pid``, or None when the index lacks it."""
    found = _searcher(str(check_index(index))).doc(pid)
    if found is None:
        return None
    raw = found.raw()
    try:
        return json.loads(raw)["contents"]
    except (ValueError, KeyError, TypeError):
        return found.contents() or raw


def stats(index: str | Path) -> dict[str, Any]:
    """The manifest plus Lucene's own counts."""
    path = check_index(index)
    manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    reader = _searcher(str(path))
    manifest["lucene"] = {"documents": reader.num_docs}
    return manifest
