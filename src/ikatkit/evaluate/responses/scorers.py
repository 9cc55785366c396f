"""Response scorers: batch functions over parallel lists, each returning ``{measure: [value per item]}``.

Every scorer takes ``responses`` (one string per item) and either ``references`` (one string per item) or
``passages`` (a list of grounding texts per item) and returns one list of floats per measure it computes,
aligned with the inputs. Models load once per scorer object; keep the object to score many batches.

- :func:`rouge`: ROUGE-1/2/L F1, recall and precision from ``rouge-score`` (Porter stemmer on, its default
  tokenizer: lower case, runs of ``[a-z0-9]``).
- :func:`token_recall` / :func:`k_precision`: token overlap as in Adlakha et al. (2023), counted as multisets
  (a reference token matches at most as often as it occurs in the response), over :func:`tokenize`.
- :class:`BertScore`: BERTScore precision / recall / F1 of the ``bert-score`` package with any model and layer;
  ``label`` names both (``all-MiniLM-L6-v2:L6``); :meth:`BertScore.k_precision` against grounding passages.
- :class:`Embedder`: unit-length sentence embeddings (the bi-encoder of ``ikatkit.rank``), for
  :meth:`Embedder.similarity` (cosine response/reference) and :func:`citation_coverage`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.collection.segment import rule_splitter
from ikatkit.errors import IkatError
from ikatkit.models import DEFAULT_ENCODER, resolve_model
from ikatkit.placement import PlacedModel

Scores = dict[str, list[float]]
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
DEFAULT_MODEL = DEFAULT_ENCODER


def _check_lengths(responses: Sequence[Any], others: Sequence[Any], what: str) -> None:
    if len(responses) != len(others):
        raise IkatError(f"{len(responses)} responses but {len(others)} {what}", where="response scorer",
                        fix=f"pass one {what.rstrip('s')} entry per response")


@lru_cache(maxsize=4)
def _rouge_scorer(types: tuple[str, ...], stemmer: bool) -> Any:  # rouge_score ships no type hints
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(types), use_stemmer=stemmer)


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    from rouge_score import tokenizers

    return tokenizers.DefaultTokenizer(use_stemmer=False)


def tokenize(text: str) -> list[str]:
    """The one tokenizer of the token measures: rouge-score's, without stemming (lower case, ``[a-z0-9]+``)."""
    return _tokenizer().tokenize(text)


def rouge(responses: Sequence[str], references: Sequence[str], types: Sequence[str] = ROUGE_TYPES,
          stemmer: bool = True) -> Scores:
    """``{type}_f``, ``{type}_r`` and ``{type}_p`` per item: rouge-score's F1, recall and precision of each response
    against its reference (``RougeScorer(types, use_stemmer=stemmer).score(reference, response)``)."""
    _check_lengths(responses, references, "references")
    scorer = _rouge_scorer(tuple(types), stemmer)
    out: Scores = {f"{t}_{part}": [] for t in types for part in "frp"}
    for response, reference in zip(responses, references):
        scores = scorer.score(reference, response)
        for t in types:
            out[f"{t}_f"].append(float(scores[t].fmeasure))
            out[f"{t}_r"].append(float(scores[t].recall))
            out[f"{t}_p"].append(float(scores[t].precision))
    return out


def bleu(responses: Sequence[str], references: Sequence[str]) -> list[float]:
    """Sentence BLEU (0-100) of each response against its reference: sacrebleu's ``sentence_bleu`` defaults."""
    import sacrebleu

    _check_lengths(responses, references, "references")
    return [float(sacrebleu.sentence_bleu(r, [ref]).score) for r, ref in zip(responses, references)]


def _overlap(a: list[str], b: list[str]) -> int:
    return sum((Counter(a) & Counter(b)).values())


def token_recall(responses: Sequence[str], references: Sequence[str]) -> list[float]:
    """Share of the reference's tokens found in the response (0 for an empty reference)."""
    _check_lengths(responses, references, "references")
    values = []
    for response, reference in zip(responses, references):
        ref = tokenize(reference)
        values.append(_overlap(tokenize(response), ref) / len(ref) if ref else 0.0)
    return values


def k_precision(responses: Sequence[str], passages: Sequence[Sequence[str]]) -> list[float]:
    """Share of the response's tokens found in its grounding passages taken together (0 for an empty response)."""
    _check_lengths(responses, passages, "passage lists")
    values = []
    for response, texts in zip(responses, passages):
        tokens = tokenize(response)
        knowledge = [t for text in texts for t in tokenize(text)]
        values.append(_overlap(tokens, knowledge) / len(tokens) if tokens else 0.0)
    return values


def rouge_l_grounding(responses: Sequence[str], passages: Sequence[Sequence[str]]) -> list[float]:
    """ROUGE-L precision of the response against its grounding passages joined by spaces (rouge-score, stemmed):
    the share of the response's tokens on a longest common subsequence with the passages."""
    _check_lengths(responses, passages, "passage lists")
    return rouge(responses, [" ".join(texts) for texts in passages], types=("rougeL",))["rougeL_p"]


def model_label(model: str) -> str:
    """A short printable name of a model: bundled names by the model they hold, paths by their last folder."""
    if model == DEFAULT_MODEL:
        return "all-MiniLM-L6-v2"
    if model == "bundled:smollm2":
        return "SmolLM2-135M-Instruct"
    return Path(model).name if Path(model).exists() else model


class BertScore(PlacedModel):
    """BERTScore (``bert_score.BERTScorer``) with a configurable model and layer, loaded once.

    ``model``: ``bundled:minilm`` (default, offline), a hub id or a folder; ``layer``: the hidden layer whose
    token embeddings are matched (default: bert-score's choice for models it knows, else the model's last
    layer). No IDF weighting, no baseline rescaling: raw cosine-greedy-matching values in [-1, 1]. On the CPU in
    float32 unless ``device`` says otherwise (:mod:`ikatkit.placement`).
    """

    kind = "bi-encoder"
    default_device = "cpu"

    def __init__(self, model: str = DEFAULT_MODEL, layer: int | None = None, batch_size: int = 64,
                 device: str | None = None) -> None:
        super().__init__(device, "float32")
        from bert_score import BERTScorer
        from bert_score.utils import model2layers
        from transformers import AutoConfig

        path = resolve_model(model)
        if layer is None:
            layer = model2layers.get(model) or AutoConfig.from_pretrained(path).num_hidden_layers
        self.model, self.layer = model, int(layer)
        self.label = f"{model_label(model)}:L{self.layer}"
        self.scorer = BERTScorer(model_type=path, num_layers=self.layer, batch_size=batch_size, device=self.device)

    def score(self, responses: Sequence[str], references: Sequence[str]) -> Scores:
        """``precision``, ``recall`` and ``f1`` of each response (candidate) against its reference.

        A pair with an empty side scores 0, bert-score's own rule, applied here without calling it (bert-score
        0.3.13 cannot encode an empty text under transformers 5)."""
        _check_lengths(responses, references, "references")
        out: Scores = {"precision": [0.0] * len(responses), "recall": [0.0] * len(responses),
                       "f1": [0.0] * len(responses)}
        live = [i for i, (a, b) in enumerate(zip(responses, references)) if a.strip() and b.strip()]
        if live:
            values = self.scorer.score([responses[i] for i in live], [references[i] for i in live], verbose=False)
            for name, tensor in zip(out, values):
                for i, value in zip(live, tensor.tolist()):
                    out[name][i] = value
        return out

    def k_precision(self, responses: Sequence[str], passages: Sequence[Sequence[str]]) -> list[float]:
        """BERTScore precision of each response against its best grounding passage (max over the passages;
        0 for an item without passages). One pair per (response, passage), scored in one batch."""
        _check_lengths(responses, passages, "passage lists")
        pairs = [(i, text) for i, texts in enumerate(passages) for text in texts]
        best = [0.0] * len(responses)
        if pairs:
            precision = self.score([responses[i] for i, _ in pairs], [text for _, text in pairs])["precision"]
            seen: set[int] = set()
            for (i, _), value in zip(pairs, precision):
                best[i] = value if i not in seen else max(best[i], value)
                seen.add(i)
        return best


class Embedder:
    """Unit-length sentence embeddings from a sentence-transformers model (``ikatkit.rank.BiEncoder``), loaded once
    and kept by text; ``label`` names the model. New texts are encoded by the bi-encoder (equal-length batches of
    ``batch_size``, its embedding cache on disk)."""

    def __init__(self, model: str = DEFAULT_MODEL, device: str | None = None, batch_size: int = 32) -> None:
        from ikatkit.rank.biencoder import BiEncoder

        self.encoder = BiEncoder(model, batch_size=batch_size, device=device)
        self.model, self.label = model, model_label(model)
        self._vectors: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if new:
            self._vectors.update(zip(new, self.encoder.encode(new)))
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 1))

    def similarity(self, responses: Sequence[str], references: Sequence[str]) -> list[float]:
        """Cosine similarity of each response's embedding with its reference's (0 when either is empty)."""
        _check_lengths(responses, references, "references")
        if not responses:
            return []
        a, b = self.encode(responses), self.encode(references)
        return [float(x) if r.strip() and f.strip() else 0.0
                for x, r, f in zip(np.einsum("ij,ij->i", a, b), responses, references)]

    def best_match(self, queries: Sequence[Sequence[str]], candidates: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Per item, each query text's highest cosine with any of the item's candidate texts (-1 without any)."""
        _check_lengths(queries, candidates, "candidate lists")
        texts = list(dict.fromkeys(t for group in (*queries, *candidates) for t in group))
        vectors = dict(zip(texts, self.encode(texts))) if texts else {}
        out = []
        for group, others in zip(queries, candidates):
            if not group:
                out.append(np.zeros(0))
            elif not others:
                out.append(np.full(len(group), -1.0))
            else:
                q = np.stack([vectors[t] for t in group])
                c = np.stack([vectors[t] for t in others])
                out.append((q @ c.T).max(axis=1))
        return out


@lru_cache(maxsize=4)
def shared_embedder(model: str = DEFAULT_MODEL) -> Embedder:
    """One :class:`Embedder` per model in a process: the pipeline stages that score with it (refine_response,
    refine_evidence, refine_memory) share it instead of each loading the model."""
    return Embedder(model)


def sentences(text: str) -> list[str]:
    """The response's sentences (ikatkit's rule splitter: after ., ! or ? before an upper-case letter or digit)."""
    return rule_splitter(text)


def citation_coverage(embedder: Embedder, responses: Sequence[str], passages: Sequence[Sequence[str]],
                      threshold: float) -> list[float]:
    """Share of each response's sentences whose best-matching grounding passage (embedding cosine) reaches
    ``threshold`` (0 for an empty response or one without passages)."""
    _check_lengths(responses, passages, "passage lists")
    split = [sentences(r) for r in responses]
    best = embedder.best_match(split, [list(p) for p in passages])
    return [float(np.mean(b >= threshold)) if len(b) else 0.0 for b in best]
