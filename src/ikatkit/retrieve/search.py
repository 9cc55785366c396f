"""From queries to ranked passage lists: the one path of the ``retrieve`` stage, ``ikatkit search`` (hybrid lists
fused by :func:`ikatkit.retrieve.fusion.fuser`, as the ``fuse`` stage fuses) and the context evaluation.

A searcher is any resource with ``batch_search(queries, k)`` (:class:`~ikatkit.retrieve.bm25.Bm25Searcher`,
:class:`~ikatkit.retrieve.dense.DenseSearcher`, a partitioned searcher, which also takes ``partitions``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ikatkit.capabilities import Searcher
from ikatkit.retrieve.fusion import fuser

Lists = dict[str, list[tuple[str, float]]]


def search(searcher: Searcher, queries: Mapping[str, str], k: int = 1000,
           partitions: Mapping[str, Sequence[int]] | None = None) -> Lists:
    """``{qid: [(passage id, score), ...]}`` for ``{qid: query}`` in one batch; ``partitions`` (``{qid: names}``,
    after ``select_partition``) restricts each query to its partitions where any is chosen."""
    restrict = {"partitions": dict(partitions)} if partitions and any(partitions.values()) else {}
    hits = searcher.batch_search(dict(queries), k, **restrict)
    return {qid: hits[qid] for qid in queries}


def search_all(searchers: Sequence[Any], queries: Mapping[str, str], k: int = 1000) -> list[Lists]:
    """One :func:`search` per searcher (e.g. BM25 and dense, to fuse)."""
    return [search(searcher, queries, k) for searcher in searchers]


def fuse_per_query(found: Sequence[Lists], method: str = "interleave", k: int = 1000,
                   weights: Sequence[float] | None = None, normalisation: str = "minmax") -> Lists:
    """Per query, the fusion of each searcher's list (``found`` as :func:`search_all` returns it)."""
    fused = fuser(method, weights, normalisation)
    return {qid: fused([lists[qid] for lists in found], k=k) for qid in found[0]} if found else {}
