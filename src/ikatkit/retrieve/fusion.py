"""Rank fusion over lists of ``(id, score)``: round-robin interleaving, RRF, normalised weighted scores.

Fused lists carry strictly decreasing scores, as official runs need non-increasing scores.

Kept here rather than taken from ranx (0.3.21): ranx has no round-robin interleaving (the seed paper's GtR
fusion), its RRF takes a run's ranks from its own score sort, which leaves score ties in no stated order (ours:
ties by id, as trec_eval reads runs), and it would bring numba's JIT compilation for two short loops.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from functools import partial

from ikatkit.errors import IkatError

Ranking = Sequence[tuple[str, float]]
METHODS = ("interleave", "rrf", "weighted")
NORMALISATIONS = ("minmax", "zscore")


def interleave(lists: Sequence[Ranking], k: int = 1000) -> list[tuple[str, float]]:
    """Take the 1st of each list, then the 2nd of each, ...; skip ids already taken; score 1/rank."""
    fused: list[str] = []
    seen: set[str] = set()
    for depth in range(max((len(r) for r in lists), default=0)):
        for ranking in lists:
            if depth < len(ranking) and ranking[depth][0] not in seen:
                seen.add(ranking[depth][0])
                fused.append(ranking[depth][0])
    return [(pid, 1.0 / rank) for rank, pid in enumerate(fused[:k], start=1)]


def rrf(lists: Sequence[Ranking], k: int = 1000, k_rrf: int = 60) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: sum of 1 / (k_rrf + rank); ties broken by id."""
    scores: dict[str, float] = {}
    for ranking in lists:
        for rank, (pid, _) in enumerate(ranking, start=1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (k_rrf + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]


def normalize(ranking: Ranking, method: str = "minmax") -> list[tuple[str, float]]:
    """Scores rescaled by ``minmax`` (to [0, 1]) or ``zscore``; order kept."""
    scores = [s for _, s in ranking]
    if not scores:
        return []
    if method == "minmax":
        low, high = min(scores), max(scores)
        return [(pid, (s - low) / (high - low) if high > low else 1.0) for pid, s in ranking]
    if method == "zscore":
        mean, sd = statistics.fmean(scores), statistics.pstdev(scores)
        return [(pid, (s - mean) / sd if sd else 0.0) for pid, s in ranking]
    raise ValueError(f"unknown normalisation {method!r}: use minmax or zscore")


def weighted(lists: Sequence[Ranking], k: int = 1000, weights: Sequence[float] | None = None,
             method: str = "minmax") -> list[tuple[str, float]]:
    """Score fusion: the weighted sum of each list's scores normalised by ``method`` (an id a list lacks adds
    nothing from it); equal weights by default; ties broken by id. E.g. BM25 with dense (hybrid retrieval)."""
    weights = list(weights) if weights is not None else [1.0] * len(lists)
    if len(weights) != len(lists):
        raise IkatError(f"{len(weights)} fusion weights for {len(lists)} candidate lists", where="fuse.weights",
                        fix="give one weight per retrieve stage (and per generated query), in stage order")
    scores: dict[str, float] = {}
    for weight, ranking in zip(weights, lists):
        for pid, score in normalize(ranking, method):
            scores[pid] = scores.get(pid, 0.0) + weight * score
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]


def fuser(method: str = "interleave", weights: Sequence[float] | None = None,
          normalisation: str = "minmax") -> Callable[..., list[tuple[str, float]]]:
    """The fusion ``f(lists, k=...)`` of ``method`` (one of :data:`METHODS`); ``weights`` and ``normalisation`` (one
    of :data:`NORMALISATIONS`) are those of ``weighted``."""
    if method not in METHODS:
        raise IkatError(f"unknown fusion method {method!r}", where="fusion", fix=f"use one of {METHODS}")
    if normalisation not in NORMALISATIONS:
        raise IkatError(f"unknown normalisation {normalisation!r}", where="fusion", fix=f"use one of {NORMALISATIONS}")
    if method == "weighted":
        return partial(weighted, weights=weights, method=normalisation)
    return {"interleave": interleave, "rrf": rrf}[method]
