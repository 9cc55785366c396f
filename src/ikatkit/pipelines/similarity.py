"""Ranker scores as UniMS-RAG's similarity tokens: a score mapped to [0, 1], written as 0.1 ... 1.0.

How a score maps depends on the ranker that gave it: ``cosine`` for bi-encoder cosines in [-1, 1] ((s + 1) / 2),
``sigmoid`` for cross-encoder logits, ``minmax`` for unbounded scores (BM25) over the turn's whole list (its best
maps to 1, its worst to 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAPPINGS = ("cosine", "sigmoid", "minmax")


def to_unit(scores: Sequence[float], mapping: str) -> list[float]:
    """Each score of one list mapped to [0, 1] by ``mapping`` (one of :data:`MAPPINGS`)."""
    if mapping == "cosine":
        return [min(1.0, max(0.0, (s + 1) / 2)) for s in scores]
    if mapping == "sigmoid":
        return [1 / (1 + math.exp(-s)) if s >= 0 else math.exp(s) / (1 + math.exp(s)) for s in scores]
    if mapping == "minmax":
        low, high = (min(scores), max(scores)) if scores else (0.0, 0.0)
        return [(s - low) / (high - low) if high > low else 1.0 for s in scores]
    raise ValueError(f"unknown similarity mapping {mapping!r}")


def token(unit: float) -> str:
    """The similarity token of a score in [0, 1]: rounded half up to one decimal, at least 0.1 ("0.1" ... "1.0")."""
    return f"{min(10, max(1, math.floor(unit * 10 + 0.5))) / 10:.1f}"


def unit_scores(scored: Sequence[tuple[str, float]], mapping: str) -> dict[str, float]:
    """``{id: score in [0, 1]}`` of a ranked list ``[(id, score)]`` (``minmax`` over the whole list)."""
    return dict(zip([key for key, _ in scored], to_unit([float(s) for _, s in scored], mapping)))
