"""Nugget recall: which gold nuggets a response contains (a pluggable matcher), scored as AutoNuggetizer does.

A matcher gives each (response, nugget) pair a support value: 1 (support), 0.5 (partial_support), 0 (not_support).

- :class:`EmbeddingMatcher`: the nugget's highest cosine (bundled MiniLM) with a window of one or two consecutive
  response sentences reaches ``threshold`` -> 1, else 0 (never partial).
- :class:`LexicalMatcher`: the share of the nugget's content words (rouge-score tokens less scikit-learn's English
  stop words) found in one window of the response reaches ``threshold`` -> 1 (a cheap baseline).
- :class:`CrossEncoderMatcher`: a sentence-transformers ``CrossEncoder`` (an NLI / entailment model: the
  probability of its ``entailment`` label; a one-label model: its sigmoid score) of (window, nugget), best window.
- :class:`LlmMatcher`: an LLM of ``ikatkit.llm`` labels each pair with the ``nugget_support`` prompt (cached by
  the LLM layer); an output naming no label counts as a parse fallback and scores 0.

The three scored matchers (:class:`ScoredMatcher`) give ``scores(responses, nuggets)`` (one array per response)
and ``support`` (scores at ``threshold``); ``ikatkit eval-matcher`` measures any of them against human labels
(:mod:`agreement`).

castorini's ``nuggetizer`` (0.0.5) is not used: its OpenAI client ignores ``api_base`` (only ``OPENAI_BASE_URL``
reaches another server), it downloads tiktoken's vocabulary at run time and retries every failure forever, so it
cannot run offline. Its scores are defined here the same way (:func:`nugget_scores`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from ikatkit.capabilities import ChatLLM
from ikatkit.errors import IkatError
from ikatkit.evaluate.responses.data import Nugget
from ikatkit.evaluate.responses.scorers import Embedder, sentences, tokenize

VITAL_GRADE = 3
# Tuned on the 2024 gold responses of conversations 0, 1 and 4: bench/tune_nugget_threshold.py (balanced
# accuracy 0.819 there, 0.874 on conversations 5-8).
DEFAULT_THRESHOLD = 0.77
LEXICAL_THRESHOLD = 0.5
DEFAULT_MATCHER = "embedding"  # eval-responses' matcher (docs/response-agreement.md: why)
ENTAILMENT_THRESHOLD = 0.5


def nugget_scores(nuggets: Sequence[Nugget], support: Sequence[float],
                  vital_grade: int = VITAL_GRADE) -> dict[str, float]:
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


class ScoredMatcher(ABC):
    """A matcher whose support is its scores at ``threshold``: 1 at or above, else 0 (never partial)."""

    threshold: float

    @abstractmethod
    def scores(self, responses: Sequence[str], nuggets: Sequence[Sequence[Nugget]]) -> list[np.ndarray]:
        """Per response, each nugget's best score over the response's windows."""

    def support(self, responses: Sequence[str], nuggets: Sequence[Sequence[Nugget]],
                queries: Sequence[str] | None = None) -> list[list[float]]:
        return [[float(x >= self.threshold) for x in s] for s in self.scores(responses, nuggets)]


class EmbeddingMatcher(ScoredMatcher):
    """Support 1 when the nugget's best cosine with a window of the response reaches ``threshold``."""

    def __init__(self, embedder: Embedder | None = None, threshold: float = DEFAULT_THRESHOLD) -> None:
        self.embedder = embedder or Embedder()
        self.threshold = threshold
        self.label = f"{self.embedder.label} cosine>={threshold:g}"

    def similarities(self, responses: Sequence[str], nuggets: Sequence[Sequence[Nugget]]) -> list[np.ndarray]:
        """Per response, each nugget's best cosine with a window of the response (-1 for an empty response)."""
        return self.embedder.best_match([[n.text for n in group] for group in nuggets],
                                        [windows(r) for r in responses])

    scores = similarities


def content_words(text: str) -> set[str]:
    """The text's tokens (:func:`tokenize`) less scikit-learn's English stop words."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return {t for t in tokenize(text) if t not in ENGLISH_STOP_WORDS}


class LexicalMatcher(ScoredMatcher):
    """Support 1 when the share of the nugget's content words found in one response window reaches ``threshold``."""

    def __init__(self, threshold: float = LEXICAL_THRESHOLD) -> None:
        self.threshold = threshold
        self.label = f"lexical content-word recall>={threshold:g}"

    def scores(self, responses: Sequence[str], nuggets: Sequence[Sequence[Nugget]]) -> list[np.ndarray]:
        """Per response, each nugget's best share of content words in a window (0 for an empty response)."""
        out = []
        for response, group in zip(responses, nuggets):
            found = [content_words(w) for w in windows(response)]
            values = []
            for nugget in group:
                words = content_words(nugget.text)
                values.append(max((len(words & w) / len(words) for w in found), default=0.0) if words else 0.0)
            out.append(np.asarray(values, dtype=float))
        return out


class CrossEncoderMatcher(ScoredMatcher):
    """Support 1 when a cross-encoder's entailment score of (response window, nugget) reaches ``threshold``.

    ``model``: a sentence-transformers ``CrossEncoder`` (hub id or folder). With several labels, the softmax
    probability of the label whose name contains ``entail`` (NLI models: contradiction / entailment / neutral);
    with one label, its sigmoid score. The window is the premise, the nugget the hypothesis."""

    def __init__(self, model: str, threshold: float = ENTAILMENT_THRESHOLD, batch_size: int = 32) -> None:
        from sentence_transformers import CrossEncoder

        from ikatkit.models import resolve_model

        self.model = CrossEncoder(resolve_model(model), max_length=256)
        self.threshold, self.batch_size = threshold, batch_size
        labels = {int(i): str(name).lower() for i, name in self.model.config.id2label.items()}
        entail = [i for i, name in labels.items() if "entail" in name]
        if self.model.num_labels > 1 and not entail:
            raise IkatError(f"cross-encoder {model} has labels {sorted(labels.values())}, none 'entailment'",
                            where="--model", fix="use an NLI model (labels contradiction/entailment/neutral)")
        self.column = entail[0] if self.model.num_labels > 1 else None
        self.label = f"cross-encoder {model} entailment>={threshold:g}"

    def scores(self, responses: Sequence[str], nuggets: Sequence[Sequence[Nugget]]) -> list[np.ndarray]:
        """Per response, each nugget's best entailment score over the response's windows (0 when empty)."""
        pairs = [(w, n.text) for r, group in zip(responses, nuggets) for n in group for w in windows(r)]
        flat: np.ndarray | list[float]
        if self.column is None:
            flat = np.asarray(self.model.predict(pairs, batch_size=self.batch_size), dtype=float) if pairs else []
        else:
            probs = self.model.predict(pairs, batch_size=self.batch_size, apply_softmax=True) if pairs else []
            flat = np.asarray(probs, dtype=float).reshape(len(pairs), -1)[:, self.column] if pairs else []
        out, at = [], 0
        for response, group in zip(responses, nuggets):
            count = len(windows(response))
            values = []
            for _ in group:
                values.append(float(np.max(flat[at:at + count])) if count else 0.0)
                at += count
            out.append(np.asarray(values, dtype=float))
        return out


class LlmMatcher:
    """Support labels from an LLM (``ikatkit.llm.make_llm``), one prompt per (response, nugget)."""

    def __init__(self, llm: ChatLLM, max_new_tokens: int = 8) -> None:
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
