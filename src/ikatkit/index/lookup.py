"""Passage lookup and statistics of a Lucene index (ikatkit's own or foreign)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from ikatkit.index.lucene import check_index, lucene_info
from ikatkit.index.texts import LuceneTexts

__all__ = ["check_index", "doc", "stats"]


@lru_cache(maxsize=8)
def _texts(index: str) -> LuceneTexts:
    return LuceneTexts(index, why="`index get`")


def doc(index: str | Path, pid: str) -> str | None:
    """The stored text of passage ``pid``, or None when the index lacks it."""
    return _texts(str(check_index(index))).text(pid)


def stats(index: str | Path) -> dict[str, Any]:
    """The manifest (own index) plus what Lucene reports: documents, fields stored, positions, doc vectors."""
    return lucene_info(index).describe()
