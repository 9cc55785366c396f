"""Nugget recall: which gold nuggets a response contains (a pluggable matcher), scored as AutoNuggetizer does.

A matcher gives each (response, nugget) pair a support value: 1 (support), 0.5 (partial_support), 0 (not_support).

- :class:`EmbeddingMatcher`: the nugget's highest cosine (bundled MiniLM) with a window of one or two consecutive
  response sentences reaches ``threshold`` -> 1, else 0 (never partial).
- :class:`LlmMatcher`: an LLM of ``ikatkit.llm`` labels each pair with the ``nugget_support`` prompt (cached by
  the LLM layer); an output naming no label counts as a parse fallback and scores 0.

castorini's ``nuggetizer`` (0.0.5) is not used: its OpenAI client ignores ``api_base`` (only ``OPENAI_BASE_URL``
reaches another server), it downloads tiktoken's vocabulary at run time and retries every failure forever, so it
cannot run offline. Its scores are defined here the same way (:func:`nugget_scores`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ikatkit.evaluate.responses.data import Nugget
from ikatkit.evaluate.responses.scorers import Embedder, sentences

VITAL_GRADE = 3
# Tuned on the 2024 gold responses of conversations 0, 1 and 4: bench/tune_nugget_threshold.py (balanced
# accuracy 0.819 there, 0.874 on conversations 5-8).
DEFAULT_THRESHOLD = 0.77


def nugget_scores(nuggets: Sequence[Nugget], support: Sequence[float], vital_grade: int = VITAL_GRADE) -> dict[str, float]:
    """AutoNuggetizer's scores of one response: ``all``/``strict_all`` (mean support, partial as 0.5 / as 0),
    ``vital``/``strict_vital`` (the same over nuggets graded >= ``vital_grade``; absent when there is none),
    ``weighted`` (vital weight 1, okay 0.5) and ``graded`` (weights = relevance grades)."""
    if not nuggets:
        return {}
    s = np.asarray(support, dtype=float)
    strict = (s == 1.0).astype(float)
    grades = np.asarray([n.grade for n in nuggets], dtype=float)
    vital = grades >= vital_grade
    weights = np.where(vital, 1.0, 0.5)
    scores = {"all": float(s.mean()), "strict_all": float(strict.mean()),
              "weighted": float((weights * s).sum() / weights.sum()),
              "graded": float((grades * s).sum() / grades.sum()) if grades.sum() else float(s.mean())}
    if vital.any():
        scores["vital"] = float(s[vital].mean())
        scores["strict_vital"] = float(strict[vital].mean())
    return scores


def windows(text: str, size: int = 2) -> list[str]:
    """The response's sentences and every run of up to ``size`` consecutive sentences."""
    split = sentences(text)
    return [" ".join(split[i:i + n]) for n in range(1, size + 1) for i in range(len(split) - n + 1)]


class EmbeddingMatcher:
    """Support 1 when the nugget's best cosine with a window of the response reaches ``threshold``."""

    def __init__(self, embedder: Embedder | None = None, threshold: float = DEFAULT_THRESHOLD) -> None:
        self.embedder = embedder or Embedder()
        self.threshold = threshold
        self.label = f"{self.embedder.label} cosine>={threshold:g}"

    def similarities(self, responses: Sequence[str], nuggets: Sequence[Sequence[Nugget]]) -> list[np.ndarray]:
        """Per response, each nugget's best cosine with a window of the response (-1 for an empty response)."""
        return self.embedder.best_match([[n.text for n in group] for group in nuggets],
                                        [windows(r) for r in responses])

    def support(self, responses: Sequence[str], nuggets: Sequence[Sequence[Nugget]],
                queries: Sequence[str] | None = None) -> list[list[float]]:
        return [[float(x >= self.threshold) for x in sims] for sims in self.similarities(responses, nuggets)]


class LlmMatcher:
    """Support labels from an LLM (``ikatkit.llm.make_llm``), one prompt per (response, nugget)."""

    def __init__(self, llm, max_new_tokens: int = 8) -> None:  # type: ignore[no-untyped-def]
        self.llm, self.max_new_tokens = llm, max_new_tokens
        self.label = f"LLM {llm.backend}:{llm.model}"

    def support(self, responses: Sequence[str], nuggets: Sequence[Sequence[Nugget]],
                queries: Sequence[str] | None = None) -> list[list[float]]:
        from ikatkit.llm.parse import parse_support
        from ikatkit.llm.prompts import render

        queries = queries or [""] * len(responses)
        batch = [render("nugget_support", query=q or "(not given)", response=r, nugget=n.text)
                 for r, q, group in zip(responses, queries, nuggets) for n in group]
        outputs = iter(self.llm.chat(batch, max_new_tokens=self.max_new_tokens) if batch else [])
        out = []
        for response, group in zip(responses, nuggets):
            values = []
            for _ in group:
                value = parse_support(next(outputs))
                if value is None:
                    self.llm.count_fallback("nugget label not understood: not_support")
                values.append(0.0 if value is None or not response.strip() else value)
            out.append(values)
        return out
