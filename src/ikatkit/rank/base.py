"""The ranker interface: score unique (query, text) pairs once, rank candidates by score."""

from __future__ import annotations

from collections.abc import Sequence

from ikatkit import capabilities

PTKB_HISTORY_WEIGHT = 0.8  # weight of a PTKB statement's best score against earlier turns (tuned: see rank_ptkb)


class RankerBase:
    """Subclasses implement ``_score_unique``; pairs are deduplicated within a call and, with ``cache``, scores
    are kept by content across calls.

    A score computed in a batch can differ in the last bits from the same pair scored in another batch, so a
    cache across calls is on only where scores do not depend on batching (the bi-encoder, whose embeddings are
    exact functions of the text); otherwise each call scores its own pairs, and a resumed run reproduces its
    scores exactly.
    """

    def __init__(self, cache: bool = True) -> None:
        self.keep = cache
        self._cache: dict[tuple[str, str], float] = {}
        self.stats = {"pairs": 0, "scored": 0, "cache_hits": 0}

    def _score_unique(self, pairs: list[tuple[str, str]]) -> list[float]:
        raise NotImplementedError

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Scores of ``(query, text)`` pairs; each distinct pair is scored once per ranker."""
        known = self._cache if self.keep else {}
        todo = list(dict.fromkeys(p for p in pairs if p not in known))
        self.stats["pairs"] += len(pairs)
        self.stats["cache_hits"] += len(pairs) - len(todo)
        scores = dict(zip(todo, self._score_unique(todo))) if todo else {}
        self.stats["scored"] += len(todo)
        if self.keep:
            self._cache.update(scores)
        return [scores[p] if p in scores else known[p] for p in pairs]

    def rank(self, query: str, candidates: dict[str, str], k: int | None = None) -> list[tuple[str, float]]:
        """Candidates ``{id: text}`` by descending score (ties by id), top ``k``."""
        return self.rank_many({query: candidates}, k)[query]

    def rank_many(self, lists: dict[str, dict[str, str]], k: int | None = None) -> dict[str, list[tuple[str, float]]]:
        """Several queries' candidates scored in one call, so pairs shared across lists are scored once."""
        keys = [(query, pid) for query, candidates in lists.items() for pid in candidates]
        scores = self.score([(query, lists[query][pid]) for query, pid in keys])
        ranked: dict[str, list[tuple[str, float]]] = {query: [] for query in lists}
        for (query, pid), score in zip(keys, scores):
            ranked[query].append((pid, score))
        for query, items in ranked.items():
            items.sort(key=lambda item: (-item[1], item[0]))
            ranked[query] = items[:k] if k else items
        return ranked


def history_texts(earlier: Sequence[tuple[str, str]], turns: int, responses: int) -> list[str]:
    """rank_ptkb's history from the earlier (utterance, response) pairs: the last ``turns`` utterances and the
    last ``responses`` responses (empty ones skipped)."""
    return ([u for u, _ in earlier][-turns:] if turns > 0 else []) + \
        ([r for _, r in earlier[-responses:] if r] if responses > 0 else [])


def rank_ptkb(ranker: capabilities.Ranker, query: str, ptkb: dict[str, str], k: int | None = None,
              history: Sequence[str] = (), history_weight: float = 0.0) -> list[tuple[str, float]]:
    """A conversation's PTKB statements ``{key: text}`` ranked against ``query`` (ties by key), top ``k``.

    With ``history`` (earlier utterances or responses of the conversation: :func:`history_texts`) each
    statement's score adds ``history_weight`` times its best score against any of them: a statement the
    conversation has been about stays relevant (the ``rank_ptkb`` stage's options; figures in
    bench/tune_ptkb_history.py)."""
    keys = list(ptkb)
    if not history or not history_weight:
        return ranker.rank(query, ptkb, k)
    scores = ranker.score([(text, ptkb[key]) for text in (query, *history) for key in keys])
    rows = [scores[i * len(keys):(i + 1) * len(keys)] for i in range(len(history) + 1)]
    combined = [now + history_weight * max(past) for now, *past in zip(*rows)]
    ranked = sorted(zip(keys, combined), key=lambda item: (-item[1], item[0]))
    return ranked[:k] if k else ranked
