"""A PTKB statement classifier over a ranker's scores: the ``classify_ptkb`` stage's ``classifier`` option.

Each statement of a turn's conversation gets three features from the ranker's scores against the turn's query: its
score, its score minus the turn's best, and 1 / its rank. A logistic model (scikit-learn) over them is trained on
topics whose turns carry PTKB labels (the 2023 train topics' ``ptkb_provenance``: the organizers' PTKB qrels), and
the probability threshold is chosen by cross-validation over conversations on those topics only (the threshold with
the best pooled F1 of out-of-fold probabilities). The trained model is a small JSON file; using it needs no
scikit-learn.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.rank.base import Ranker, rank_ptkb
from ikatkit.topics import Topics

FEATURES = ("score", "gap_to_best", "reciprocal_rank")
FORMAT = "ikatkit-ptkb-classifier-v1"


def features(ranked: Sequence[tuple[str, float]]) -> list[list[float]]:
    """The feature rows of a turn's statements ranked by score (best first), in that order."""
    best = ranked[0][1] if ranked else 0.0
    return [[float(score), float(score - best), 1.0 / rank] for rank, (_, score) in enumerate(ranked, start=1)]


@dataclass(frozen=True)
class PtkbClassifier:
    """A trained model: the ranker it reads (``kind``, ``model``), the logistic weights over :data:`FEATURES`,
    the probability threshold, and what it was trained on."""

    kind: str
    model: str
    coef: tuple[float, ...]
    intercept: float
    threshold: float
    trained_on: dict[str, Any]

    def probabilities(self, ranked: Sequence[tuple[str, float]]) -> list[float]:
        """The probability that each ranked statement is relevant."""
        return [1.0 / (1.0 + math.exp(-(self.intercept + sum(w * x for w, x in zip(self.coef, row)))))
                for row in features(ranked)]

    def choose(self, ranked: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
        """The statements whose probability reaches the threshold, with that probability, best first."""
        return [(key, p) for (key, _), p in zip(ranked, self.probabilities(ranked)) if p >= self.threshold]

    def save(self, path: str | Path) -> None:
        from ikatkit.atomic import write_text

        write_text(path, json.dumps({"format": FORMAT, "features": list(FEATURES), **asdict(self)}, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> PtkbClassifier:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise IkatError("PTKB classifier file not found", path=path,
                            fix="train one with `ikatkit train-ptkb-classifier TOPICS --out FILE`") from None
        except json.JSONDecodeError as err:
            raise IkatError(f"not JSON: {err.msg}", path=path, where=f"line {err.lineno}",
                            fix="pass a file written by `ikatkit train-ptkb-classifier`") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("features") != list(FEATURES):
            raise IkatError(f"not a {FORMAT} file with features {list(FEATURES)}", path=path,
                            fix="retrain it with `ikatkit train-ptkb-classifier`")
        try:
            return cls(str(data["kind"]), str(data["model"]), tuple(float(w) for w in data["coef"]),
                       float(data["intercept"]), float(data["threshold"]), dict(data.get("trained_on") or {}))
        except (KeyError, TypeError, ValueError) as err:
            raise IkatError(f"field {err} missing or malformed", path=path,
                            fix="retrain it with `ikatkit train-ptkb-classifier`") from None


def ranked_turns(topics: Topics, queries: Mapping[str, str], ranker: Ranker) -> dict[str, list[tuple[str, float]]]:
    """Every turn's conversation PTKB ranked against its query (all statements)."""
    return {turn.qid: rank_ptkb(ranker, queries[turn.qid], dict(topics.conversation_of(turn.qid).ptkb))
            for turn in topics}


def train_classifier(topics: Topics, queries: Mapping[str, str], ranker: Ranker, kind: str, model: str,
                     folds: int = 5) -> PtkbClassifier:
    """Fit the logistic model on the labelled turns of ``topics`` (those citing statements in
    ``ptkb_provenance``) and choose its threshold by ``folds``-fold cross-validation grouped by conversation."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    labels = topics.ptkb_qrels()
    if not labels:
        raise IkatError("no turn of the topics cites PTKB statements (ptkb_provenance)", path=topics.path,
                        fix="train on topics with PTKB labels, e.g. the 2023 train topics")
    ranked = ranked_turns(topics.subset(list(dict.fromkeys(q.rpartition("_")[0] for q in labels))),
                          queries, ranker)
    rows, truth, groups = [], [], []
    for qid, items in ranked.items():
        if qid in labels:
            rows += features(items)
            truth += [labels[qid][key] for key, _ in items]
            groups += [qid.rpartition("_")[0]] * len(items)
    x, y = np.array(rows), np.array(truth)
    conversations = len(set(groups))
    if len(set(truth)) < 2 or conversations < 2:
        raise IkatError(f"{conversations} labelled conversation(s) with labels {sorted(set(truth))}",
                        path=topics.path, fix="train on topics with relevant and other statements in 2+ conversations")
    out_of_fold = np.zeros(len(y))
    for train, test in GroupKFold(n_splits=min(folds, conversations)).split(x, y, groups):
        fitted = LogisticRegression().fit(x[train], y[train])
        out_of_fold[test] = fitted.predict_proba(x[test])[:, 1]
    threshold = _best_threshold(out_of_fold, y)
    fitted = LogisticRegression().fit(x, y)
    trained_on = {"topics": str(topics.path or ""), "turns": len(labels), "statements": len(y),
                  "relevant": int(y.sum()), "folds": min(folds, conversations)}
    return PtkbClassifier(kind, model, tuple(float(w) for w in fitted.coef_[0]), float(fitted.intercept_[0]),
                          threshold, trained_on)


def _best_threshold(probabilities: Any, truth: Any) -> float:
    """The probability threshold with the best pooled F1 (ties: the higher threshold)."""
    best, chosen = -1.0, 0.5
    for threshold in sorted(set(float(p) for p in probabilities), reverse=True):
        picked = probabilities >= threshold
        tp = float((picked & (truth == 1)).sum())
        f1 = 2 * tp / (picked.sum() + truth.sum()) if tp else 0.0
        if f1 > best:
            best, chosen = f1, threshold
    return chosen
