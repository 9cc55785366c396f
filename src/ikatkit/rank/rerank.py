"""Re-ranking passage lists against their queries: the one path of the ``rerank`` stage, ``ikatkit rerank`` and the
context evaluation."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from ikatkit.rank.base import Ranker

K = TypeVar("K", bound=Hashable)


def rerank_lists(ranker: Ranker, lists: Mapping[K, tuple[str, Sequence[str]]], texts: Mapping[str, str],
                 k: int | None = None) -> dict[K, list[tuple[str, float]]]:
    """Each ``{key: (query, passage ids)}`` list re-ranked by ``ranker`` against its query (descending score, ties by
    id), top ``k``. Lists of one query are scored in one batch, each pair once; a passage without text in
    ``texts`` is scored as the empty text."""
    by_query: dict[str, dict[str, str]] = {}
    for query, ids in lists.values():
        by_query.setdefault(query, {}).update({pid: texts.get(pid, "") for pid in ids})
    ranked = ranker.rank_many(by_query, None)
    result: dict[K, list[tuple[str, float]]] = {}
    for key, (query, ids) in lists.items():
        own = set(ids)
        kept = [(pid, float(score)) for pid, score in ranked[query] if pid in own]
        result[key] = kept[:k] if k else kept
    return result
