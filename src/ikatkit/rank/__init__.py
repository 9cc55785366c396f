"""Re-rankers and PTKB rankers behind one interface: ``score(pairs)`` and ``rank(query, candidates, k)``."""

from __future__ import annotations

from typing import Any

from ikatkit.rank.base import RankerBase, rank_ptkb
from ikatkit.rank.biencoder import BiEncoder
from ikatkit.rank.crossencoder import CrossEncoderRanker

KINDS = {"bi-encoder": BiEncoder, "cross-encoder": CrossEncoderRanker}


def make_ranker(kind: str, model: str, **options: Any) -> RankerBase:
    """A ranker of ``kind`` (bi-encoder or cross-encoder) over ``model`` (hub id, path or ``bundled:minilm``)."""
    from ikatkit.errors import IkatError

    if kind not in KINDS:
        raise IkatError(f"unknown ranker kind {kind!r}", fix=f"use one of {sorted(KINDS)}")
    return KINDS[kind](model, **options)


__all__ = ["BiEncoder", "CrossEncoderRanker", "RankerBase", "make_ranker", "rank_ptkb"]
