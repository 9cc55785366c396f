"""The ranker interface: score unique (query, text) pairs once, rank candidates by score."""

from __future__ import annotations

from collections.abc import Sequence


def default_batch_size(device: object) -> int:
    """1 on CPU, where it is as fast as batching (measured: 300 passages in 10.5 s either way) and makes every
    score independent of which other texts share its batch, so a resumed run reproduces its scores bit for bit;
    64 on accelerators, where batching pays."""
    return 1 if str(device).startswith("cpu") else 64


class Ranker:
    """Subclasses implement ``_score_unique``; pairs are deduplicated and scores cached by content."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], float] = {}
        self.stats = {"pairs": 0, "scored": 0, "cache_hits": 0}

    def _score_unique(self, pairs: list[tuple[str, str]]) -> list[float]:
        raise NotImplementedError

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Scores of ``(query, text)`` pairs; each distinct pair is scored once per ranker."""
        todo = list(dict.fromkeys(p for p in pairs if p not in self._cache))
        self.stats["pairs"] += len(pairs)
        self.stats["cache_hits"] += len(pairs) - len(todo)
        if todo:
            self.stats["scored"] += len(todo)
            self._cache.update(zip(todo, self._score_unique(todo)))
        return [self._cache[p] for p in pairs]

    def rank(self, query: str, candidates: dict[str, str], k: int | None = None) -> list[tuple[str, float]]:
        """Candidates ``{id: text}`` by descending score (ties by id), top ``k``."""
        ids = list(candidates)
        scores = self.score([(query, candidates[i]) for i in ids])
        ranked = sorted(zip(ids, scores), key=lambda item: (-item[1], item[0]))
        return ranked[:k] if k else ranked


def rank_ptkb(ranker: Ranker, query: str, ptkb: dict[str, str], k: int | None = None) -> list[tuple[str, float]]:
    """A conversation's PTKB statements ``{key: text}`` ranked against ``query``."""
    return ranker.rank(query, ptkb, k)
