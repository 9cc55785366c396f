"""Re-ranking passage lists against their queries: the one path of the ``rerank`` stage, ``ikatkit rerank`` and the
context evaluation."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from ikatkit.capabilities import Ranker

K = TypeVar("K", bound=Hashable)


def rerank_lists(ranker: Ranker, lists: Mapping[K, tuple[str, Sequence[str]]], texts: Mapping[str, str],
                 k: int | None = None, depth: int | None = None) -> dict[K, list[tuple[str, float]]]:
    """Each ``{key: (query, passage ids)}`` list re-ranked by ``ranker`` against its query (descending score, ties by
    id), top ``k``. Lists of one query are scored in one batch, each pair once; a passage without text in
    ``texts`` is scored as the empty text. With ``depth``, only each list's first ``depth`` passages are scored; the
    rest follow in their given order, scored 1, 2, ... below the lowest re-ranked score."""
    by_query: dict[str, dict[str, str]] = {}
    for query, ids in lists.values():
        by_query.setdefault(query, {}).update({pid: texts.get(pid, "") for pid in ids[:depth]})
    ranked = ranker.rank_many(by_query, None)
    result: dict[K, list[tuple[str, float]]] = {}
    for key, (query, ids) in lists.items():
        head = set(ids[:depth])
        kept = [(pid, float(score)) for pid, score in ranked[query] if pid in head]
        floor = min((score for _, score in kept), default=0.0)
        kept += [(pid, floor - rank) for rank, pid in enumerate(ids[depth:] if depth else [], start=1)]
        result[key] = kept[:k] if k else kept
    return result
