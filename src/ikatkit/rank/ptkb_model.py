"""A trained PTKB model that reads the conversation: which of a conversation's statements matter to a turn.

Each statement of a turn gets features from a ranker's scores (the bi-encoder's cosines) of the statement against
the turn's query, against every earlier utterance of the conversation (the opening one, the mean over the turns so
far, the best of them), against the earlier responses (``ranked_*``: rank_ptkb's ranking with the last 2
responses), and from the rankings of the earlier turns (how often the statement was among a turn's top 3, whether
it led one): "I eat dinner late at night" matters to every turn of an acid-reflux conversation whatever the turn's
words. Everything comes from what a turn record carries (query, previous utterances and responses, the PTKB), so
the model works on topic files and interactively alike.

A logistic model (scikit-learn) over standardised features is trained on turns whose ``ptkb_provenance`` labels
them (the 2023 train topics: the organizers' labels); the probability threshold is chosen by cross-validation
grouped by conversation (best mean per-turn F1 of the out-of-fold probabilities), under the model's decision
rule (:data:`DECISIONS`). ``features = "responses"`` (the default) reads rank_ptkb's ranking with the last 2
responses and the conversation; ``"turn"`` keeps the first classifier's three features (score, gap to the turn's
best, 1 / rank). The trained model is a small JSON file; using it needs no scikit-learn. ``rank_ptkb`` ranks by
its probabilities, ``classify_ptkb`` keeps those at or above its threshold, and at least the most probable with
``decision = "at-least-one"`` (docs/ptkb-classification.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.capabilities import Ranker
from ikatkit.rank.base import PTKB_HISTORY_WEIGHT, history_texts
from ikatkit.topics import Topics

FORMAT = "ikatkit-ptkb-model-v2"
DEFAULT = "bundled:ptkb"
"""The shipped default model's name (its file: ``ikatkit/data/ptkb/default.json``, trained on all of 2023 by
bench/ptkb_default_cv.py; docs/ptkb-classification.md), wherever a classifier file is named."""
TOP = 3  # a statement "among a turn's top statements" (persistence)
RECENT = 2  # the earlier utterances of "recent_gap" (rank_ptkb's history_turns for raw utterances)
RANKED = (2, PTKB_HISTORY_WEIGHT)
"""The ``ranked_*`` features' (responses, weight): rank_ptkb's ranking with ``history_responses = 2`` at the
default ``history_weight``, the setting chosen on the 2023 train topics (bench/tune_ptkb_history.py)."""
ALL_FEATURES = ("score", "gap_to_best", "reciprocal_rank", "score_z", "conversation", "conversation_gap",
                "conversation_rank", "opening_gap", "best_turn_gap", "recent_gap", "history_gap",
                "history_rank", "response_gap",
                "last_response_gap", "persistence", "led_before", "ranked_score", "ranked_gap", "ranked_rank",
                "finetuned", "ranked_z", "ranked_position", "conversation_z")
"""Every feature a model may read; ``ranked_z``, ``ranked_position`` (the share of the PTKB ranked above the
statement) and ``conversation_z`` are relative to the PTKB's size and spread, so they mean the same for 8 and 20
statements."""
DECISIONS = ("at-least-one", "threshold", "expected-f1")
"""How a turn's set is chosen: the statements at or above the threshold (``threshold``), and the most probable
one where none reaches it (``at-least-one``, the default of training: a turn that cites nothing scores F1 0 whatever
its labels, so citing the best statement there is never worse on per-turn F1; on the 2023 train topics'
cross-validation it was as good or better), or the most probable k with the best expected F1 were the labels
independent with these probabilities, ``2 * sum of their p / (k + sum of every p)`` (``expected-f1``: no threshold,
so the count follows the probabilities of the PTKB at hand, 8 statements or 20; the shipped default's rule, chosen
by cross-validation over all of 2023). Files without the field were trained with ``threshold``. Training states
each threshold rule's threshold in ``trained_on["thresholds"]`` (the same fit: the rules differ in the threshold
alone); an ``expected-f1`` model's ``threshold`` is its at-least-one threshold, stated and not read."""
THRESHOLD_RULES = ("at-least-one", "threshold")


def picked(probabilities: np.ndarray, threshold: float, decision: str) -> np.ndarray:
    """Which of a turn's statements ``decision`` cites (a boolean mask over ``probabilities``)."""
    if decision == "expected-f1" and len(probabilities):
        order = np.argsort(-probabilities, kind="stable")
        gain = 2 * np.cumsum(probabilities[order]) / (np.arange(1, len(order) + 1) + probabilities.sum())
        chosen = np.zeros(len(probabilities), dtype=bool)
        chosen[order[: int(np.argmax(gain)) + 1]] = True
        return chosen
    chosen = probabilities >= threshold
    if decision == "at-least-one" and not chosen.any() and len(chosen):
        chosen[np.argmax(probabilities)] = True
    return chosen


FEATURE_SETS = {
    "none": (),  # the fine-tuned model's score alone (with --finetune)
    "turn": ("score", "gap_to_best", "reciprocal_rank"),
    "conversation": ("score", "gap_to_best", "reciprocal_rank", "conversation_gap", "conversation_rank",
                     "persistence"),
    # the default: "conversation" with the turn's three features read from rank_ptkb's ranking with the last 2
    # responses (chosen by nested cross-validation on train: docs/ptkb-classification.md)
    "responses": ("ranked_score", "ranked_gap", "ranked_rank", "conversation_gap", "conversation_rank",
                  "persistence"),
    # the same read relative to the PTKB (no raw score, no 1 / rank: their meaning changes with the PTKB's size)
    "relative": ("ranked_gap", "ranked_z", "ranked_position", "conversation_gap", "conversation_z", "persistence"),
}


@dataclass(frozen=True)
class PtkbTurn:
    """What the model reads of a turn: its query, the earlier (utterance, response) pairs, the PTKB ``{key: text}``."""

    query: str
    history: Sequence[tuple[str, str]]
    ptkb: Mapping[str, str]


def record_turn(record: Any) -> PtkbTurn:
    """What the model reads of a pipeline's turn record: its query (the raw utterance without one), every earlier
    turn of the conversation (in an interactive run, the session's), the PTKB."""
    return PtkbTurn(record.query or record.utterance, list(record.history), dict(record.ptkb_all))


def topic_turns(topics: Topics, queries: Mapping[str, str]) -> dict[str, PtkbTurn]:
    """Every turn of ``topics`` as the model reads it: ``queries[qid]`` and the canonical earlier turns."""
    turns = {}
    for conversation in topics.conversations:
        for turn in conversation.turns:
            history = [(t.utterance, t.response or "") for t in conversation.history(turn.turn_id)]
            turns[turn.qid] = PtkbTurn(queries[turn.qid], history, dict(conversation.ptkb))
    return turns


def topic_choices(model: PtkbModel, ranker: Ranker, turns: Mapping[str, PtkbTurn], k: int | None = None,
                  ) -> dict[str, list[tuple[str, float]]]:
    """Each turn's statements with their probabilities, most probable first: those ``model`` chooses, or with
    ``k`` its top ``k`` (``classify-ptkb`` and ``ikatkit ptkb``; the stages do the same per record)."""
    ranked = {qid: model.ranked(ranker, turn) for qid, turn in turns.items()}
    return {qid: items[:k] if k else model.choose(items) for qid, items in ranked.items()}


def _reciprocal_ranks(values: np.ndarray) -> np.ndarray:
    """1 / rank of each value, best first (ties in the given order)."""
    order = np.argsort(-values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    return 1.0 / ranks


def _z(values: np.ndarray) -> np.ndarray:
    """Standard scores within the PTKB (0 where all are equal)."""
    spread = float(values.std())
    return (values - values.mean()) / spread if spread > 0 else np.zeros(len(values))


def reads_ranking(features: Sequence[str]) -> bool:
    """Whether a model over ``features`` reads the ``ranked_*`` features (computed with :data:`RANKED`)."""
    return any(name.startswith("ranked_") for name in features)


def _best_against(ranker: Ranker, sources: Sequence[str], texts: Sequence[str]) -> np.ndarray:
    """Each text's best score against any of ``sources`` (0 without any)."""
    if not sources:
        return np.zeros(len(texts))
    scores = ranker.score([(source, text) for source in sources for text in texts])
    return np.array(scores, dtype=float).reshape(len(sources), len(texts)).max(axis=0)


def finetuned_pairs(turn: PtkbTurn, context: bool) -> list[tuple[str, str]]:
    """The (turn text, statement) pairs a fine-tuned model scores, in the PTKB's order."""
    from ikatkit.rank.ptkb_finetune import turn_text

    text = turn_text(turn.query, [u for u, _ in turn.history], context)
    return [(text, statement) for statement in turn.ptkb.values()]


def feature_table(ranker: Ranker, turn: PtkbTurn, finetuned: np.ndarray | None = None,
                  ranked: tuple[int, float] = RANKED) -> tuple[list[str], np.ndarray]:
    """The statements' keys and one row of :data:`ALL_FEATURES` per statement, in the PTKB's order;
    ``finetuned``: the fine-tuned model's scores of the statements (else that column is 0); ``ranked``: the
    (responses, weight) of the ``ranked_*`` features (:data:`RANKED`; another only to cross-validate it)."""
    keys = list(turn.ptkb)
    if not keys:
        return [], np.zeros((0, len(ALL_FEATURES)))
    texts = [turn.ptkb[key] for key in keys]
    utterances = [u for u, _ in turn.history]
    responses = [r for _, r in turn.history if r.strip()]
    sources = [*utterances, turn.query, *responses]
    scores = np.array(ranker.score([(source, text) for source in sources for text in texts]),
                      dtype=float).reshape(len(sources), len(keys))
    so_far, query = scores[: len(utterances) + 1], scores[len(utterances)]
    conversation = so_far.mean(axis=0)
    best_turn = so_far.max(axis=0)
    response = scores[len(utterances) + 1:].max(axis=0) if responses else np.zeros(len(keys))
    last_response = scores[-1] if responses else np.zeros(len(keys))
    recent = so_far[-1 - RECENT:-1].max(axis=0) if utterances else np.zeros(len(keys))
    history = query + PTKB_HISTORY_WEIGHT * recent  # rank_ptkb's score with history_turns = 2
    responses_of_ranking, weight = ranked
    ranking = query + weight * _best_against(ranker, history_texts(turn.history, 0, responses_of_ranking), texts)
    top = np.array([_reciprocal_ranks(row) >= 1.0 / TOP for row in so_far])
    led = np.array([_reciprocal_ranks(row) == 1.0 for row in so_far[:-1]]).any(axis=0) if utterances \
        else np.zeros(len(keys), dtype=bool)
    columns = {
        "score": query,
        "gap_to_best": query - query.max(),
        "reciprocal_rank": _reciprocal_ranks(query),
        "score_z": _z(query),
        "conversation": conversation,
        "conversation_gap": conversation - conversation.max(),
        "conversation_rank": _reciprocal_ranks(conversation),
        "opening_gap": so_far[0] - so_far[0].max(),
        "best_turn_gap": best_turn - best_turn.max(),
        "recent_gap": recent - recent.max(),
        "history_gap": history - history.max(),
        "history_rank": _reciprocal_ranks(history),
        "response_gap": response - response.max(),
        "last_response_gap": last_response - last_response.max(),
        "persistence": top.mean(axis=0),
        "led_before": led.astype(float),
        "ranked_score": ranking,
        "ranked_gap": ranking - ranking.max(),
        "ranked_rank": _reciprocal_ranks(ranking),
        "finetuned": finetuned if finetuned is not None else np.zeros(len(keys)),
        "ranked_z": _z(ranking),
        "ranked_position": 1.0 / _reciprocal_ranks(ranking) / len(keys) - 1.0 / len(keys),
        "conversation_z": _z(conversation),
    }
    return keys, np.column_stack([columns[name] for name in ALL_FEATURES])


@dataclass(frozen=True)
class PtkbModel:
    """A trained model: the ranker it reads (``kind``, ``model``), its features, their standardisation (``mean``,
    ``scale``), the logistic weights, the probability threshold and the ``decision`` rule (:data:`DECISIONS`), and
    what it was trained on (``trained_on``, with
    the training data's ``fingerprint``). ``finetuned``: the fine-tuned MiniLM whose score is the ``finetuned``
    feature (architecture, context, epochs; once saved, the digest of its files in the folder :func:`files_of`
    the JSON file), ``scorer`` the loaded model."""

    kind: str
    model: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float
    trained_on: dict[str, Any]
    finetuned: dict[str, Any] | None = None
    decision: str = "threshold"
    scorer: Any = field(default=None, compare=False, repr=False)

    def probabilities(self, ranker: Ranker, turn: PtkbTurn) -> dict[str, float]:
        """``{key: probability that the statement is relevant to the turn}``, in the PTKB's order."""
        scores = None
        if self.finetuned is not None:
            scores = self.scorer.score(finetuned_pairs(turn, bool(self.finetuned["context"])))
        keys, table = feature_table(ranker, turn, scores)
        return dict(zip(keys, self.probabilities_of(table)))

    def probabilities_of(self, table: np.ndarray) -> list[float]:
        """The probabilities of rows of :data:`ALL_FEATURES` (a :func:`feature_table`)."""
        columns = [ALL_FEATURES.index(name) for name in self.features]
        x = (table[:, columns] - np.array(self.mean)) / np.array(self.scale)
        return [1.0 / (1.0 + math.exp(-z)) for z in (x @ np.array(self.coef) + self.intercept)]

    def ranked(self, ranker: Ranker, turn: PtkbTurn) -> list[tuple[str, float]]:
        """Every statement with its probability, most probable first (ties by key)."""
        return sorted(self.probabilities(ranker, turn).items(), key=lambda item: (-item[1], item[0]))

    def choose(self, ranked: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
        """The statements of :meth:`ranked` the model's decision rule cites (:func:`picked`), most probable first."""
        mask = picked(np.array([p for _, p in ranked], dtype=float), self.threshold, self.decision)
        return [item for item, keep in zip(ranked, mask) if keep]

    def trace(self, stage: str, probabilities: Mapping[str, float]) -> dict[str, Any]:
        """A turn record's ``ptkb_trace``: the stage, every statement's probability and the model's manifest."""
        return {"stage": stage, "probabilities": dict(probabilities), "model": self.manifest()}

    def manifest(self) -> dict[str, Any]:
        """What a run's manifest states of the model: features, threshold, training data and its fingerprint,
        the fine-tuned model (with its files' digest) where there is one."""
        stated = {"features": list(self.features), "threshold": self.threshold, "decision": self.decision,
                  "ranker": f"{self.kind}:{self.model}", "trained_on": self.trained_on}
        return {**stated, "finetuned": self.finetuned} if self.finetuned is not None else stated

    def save(self, path: str | Path) -> PtkbModel:
        """The JSON file ``path`` and, with a fine-tuned model, its files in the folder :func:`files_of` ``path``
        (their digest stated in the JSON); returns the model as saved."""
        from ikatkit.atomic import write_folder, write_text
        from ikatkit.digest import tree_digest

        saved = self
        if self.finetuned is not None:
            folder = files_of(path)
            write_folder(folder, self.scorer.save)
            saved = replace(self, finetuned={**self.finetuned, "digest": tree_digest(folder)})
        data = {f.name: getattr(saved, f.name) for f in fields(saved) if f.name != "scorer"}
        write_text(path, json.dumps({"format": FORMAT, **data}, indent=2) + "\n")
        return saved

    @classmethod
    def load(cls, path: str | Path) -> PtkbModel:
        """The model of a file of ``ikatkit train-ptkb-classifier`` (and its fine-tuned model's files, which must
        have the digest the file states); anything else is one IkatError."""
        retrain = "train one with `ikatkit train-ptkb-classifier TOPICS --out FILE`"
        path = classifier_path(path)
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise IkatError("PTKB classifier file not found", path=path, fix=retrain) from None
        except (UnicodeDecodeError, IsADirectoryError) as err:
            raise IkatError(f"not a PTKB classifier file: {err}", path=path, fix=retrain) from None
        except json.JSONDecodeError as err:
            raise IkatError(f"not JSON: {err.msg}", path=path, where=f"line {err.lineno}", fix=retrain) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise IkatError(f"not a {FORMAT} file", path=path, fix=f"re{retrain}")
        try:
            mean, scale, coef = (tuple(float(v) for v in data[name]) for name in ("mean", "scale", "coef"))
            finetuned = dict(data["finetuned"]) if data.get("finetuned") is not None else None
            if finetuned is not None:
                finetuned = {**finetuned, "architecture": str(finetuned["architecture"]),
                             "digest": str(finetuned["digest"])}
            model = cls(str(data["kind"]), str(data["model"]), tuple(str(f) for f in data["features"]), mean, scale,
                        coef, float(data["intercept"]), float(data["threshold"]), dict(data["trained_on"]), finetuned,
                        str(data.get("decision", "threshold")))
        except (KeyError, TypeError, ValueError) as err:
            raise IkatError(f"field {err} missing or malformed", path=path, fix=f"re{retrain}") from None
        unknown = [f for f in model.features if f not in ALL_FEATURES]
        sizes = {len(model.features), len(model.mean), len(model.scale), len(model.coef)}
        if model.decision not in DECISIONS:
            raise IkatError(f"decision {model.decision!r} is not one of {list(DECISIONS)}", path=path,
                            fix=f"re{retrain}")
        if unknown or len(sizes) != 1 or 0.0 in model.scale or ("finetuned" in model.features) != bool(finetuned):
            raise IkatError(f"features {unknown or list(model.features)} do not fit the weights", path=path,
                            fix=f"re{retrain}")
        if reads_ranking(model.features) and model.trained_on.get("ranked") != list(RANKED):
            raise IkatError(f"trained with the ranked_* features of (responses, weight) "
                            f"{model.trained_on.get('ranked')}; this ikatkit computes them with {list(RANKED)}",
                            path=path, fix=f"re{retrain}")
        if finetuned is None:
            return model
        return replace(model, scorer=_load_scorer(path, finetuned, retrain))


def classifier_path(name: str | Path) -> Path:
    """The file of a classifier: the shipped default's for :data:`DEFAULT`, else ``name`` itself."""
    if str(name) != DEFAULT:
        return Path(name)
    from importlib.resources import files

    return Path(str(files("ikatkit") / "data" / "ptkb" / "default.json"))


def files_of(path: str | Path) -> Path:
    """The folder of the fine-tuned model of the classifier file ``path``: beside it, ``<name>.finetuned``."""
    path = Path(path)
    return path.with_name(path.name + ".finetuned")


def _load_scorer(path: str | Path, finetuned: dict[str, Any], retrain: str) -> Any:
    from ikatkit.digest import tree_digest
    from ikatkit.rank.ptkb_finetune import FineTuned

    folder = files_of(path)
    if not folder.is_dir():
        raise IkatError("the classifier's fine-tuned model folder is missing", path=folder, fix=f"re{retrain}")
    if tree_digest(folder) != finetuned["digest"]:
        raise IkatError("the fine-tuned model's files differ from those the classifier was saved with",
                        path=folder, fix=f"re{retrain}")
    return FineTuned.load(finetuned["architecture"], folder)


def load_for_ranker(path: str | Path, kind: str | None) -> PtkbModel:
    """The model of ``path``, refused (one IkatError) unless the stage's ranker is of the kind it was trained on."""
    model = PtkbModel.load(path)
    if kind != model.kind:
        raise IkatError(f"the classifier was trained on a {model.kind} ({model.model}); this stage's ranker "
                        f"is {kind!r}", where="ranker",
                        fix=f'declare a kind = "{model.kind}" resource with model = "{model.model}"')
    return model


def summary(records: Sequence[Any], stage: str) -> dict[str, Any] | None:
    """For a run's manifest: the model(s) ``stage`` used (features, threshold, training data and its fingerprint),
    the turns it scored and the statements they kept; None where the stage used no model."""
    traces = [r.ptkb_trace for r in records if r.ptkb_trace.get("stage") == stage]
    if not traces:
        return None
    models = list({json.dumps(t["model"], sort_keys=True): t["model"] for t in traces}.values())
    return {"models": models, "turns": len(traces),
            "statements": sum(len(t["probabilities"]) for t in traces),
            "kept": sum(len(r.ptkb) for r in records if r.ptkb_trace.get("stage") == stage)}


@dataclass(frozen=True)
class TrainingData:
    """The labelled rows: :data:`ALL_FEATURES` per (turn, statement), the labels, each row's turn and conversation."""

    table: np.ndarray
    truth: np.ndarray
    qids: list[str]
    groups: list[str]
    fingerprint: str


def qrels_labels(qrels: Mapping[str, Mapping[str, int]], topics: Topics, rel: int = 1) -> dict[str, dict[str, int]]:
    """Labels from PTKB qrels keyed as ikatkit keys statements (``evaluate.ptkb_classify.ptkb_qrels_keys``): for
    each judged turn of ``topics``, every statement of its conversation, 1 where its grade is at least ``rel``, else 0
    (an unjudged statement is not relevant: trec_eval's rule)."""
    return {qid: {key: int(qrels[qid].get(key, 0) >= rel) for key in topics.conversation_of(qid).ptkb}
            for qid in topics.qids if qid in qrels}


def training_data(topics: Topics, queries: Mapping[str, str], ranker: Ranker,
                  ranked: tuple[int, float] = RANKED, labels: Mapping[str, Mapping[str, int]] | None = None,
                  ) -> TrainingData:
    """The rows of the labelled turns of ``topics``: ``labels`` (:func:`qrels_labels`), else the turns whose
    ``ptkb_provenance`` cites statements (cited or not; ``ranked``: as in :func:`feature_table`); the fingerprint
    covers the topics file, the queries and the labels (what the rows are computed from)."""
    from ikatkit.digest import file_digest, json_digest

    labels = topics.ptkb_qrels() if labels is None else labels
    if not labels or not any(any(row.values()) for row in labels.values()):
        raise IkatError("no turn of the topics cites PTKB statements", path=topics.path,
                        fix="train on topics with PTKB labels (ptkb_provenance, or PTKB qrels), e.g. the 2023 train "
                            "topics")
    turns = topic_turns(topics, queries)
    tables, truth, qids, groups = [], [], [], []
    for qid in labels:
        keys, table = feature_table(ranker, turns[qid], ranked=ranked)
        tables.append(table)
        truth += [labels[qid][key] for key in keys]
        qids += [qid] * len(keys)
        groups += [topics.conversation_of(qid).id] * len(keys)
    source = file_digest(topics.path) if topics.path else json_digest([str(c) for c in topics.conversations])
    fingerprint = json_digest({"topics": source, "queries": {q: queries[q] for q in topics.qids},
                               "labels": {q: dict(row) for q, row in labels.items()}})[:16]
    return TrainingData(np.vstack(tables), np.array(truth), qids, groups, fingerprint)


def joined(parts: Sequence[TrainingData]) -> TrainingData:
    """The rows of several labelled collections as one (their turns and conversations must not overlap)."""
    from ikatkit.digest import json_digest

    if len(parts) == 1:
        return parts[0]
    return TrainingData(np.vstack([p.table for p in parts]), np.concatenate([p.truth for p in parts]),
                        [q for p in parts for q in p.qids], [g for p in parts for g in p.groups],
                        json_digest([p.fingerprint for p in parts])[:16])


def cv_folds(data: TrainingData, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``folds`` (train rows, held-out rows) splits grouped by conversation (scikit-learn's GroupKFold)."""
    from sklearn.model_selection import GroupKFold

    conversations = len(set(data.groups))
    if len(set(data.truth.tolist())) < 2 or conversations < 2:
        raise IkatError(f"{conversations} labelled conversation(s) with labels {sorted(set(data.truth.tolist()))}",
                        fix="train on topics with relevant and other statements in 2+ conversations")
    splitter = GroupKFold(n_splits=min(folds, conversations))
    return list(splitter.split(data.table, data.truth, data.groups))


def _fit(table: np.ndarray, truth: np.ndarray, columns: list[int], c: float) -> tuple[Any, Any]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(table[:, columns])
    scaler.scale_[scaler.scale_ == 0] = 1.0
    fitted = LogisticRegression(C=c, max_iter=1000, random_state=0).fit(scaler.transform(table[:, columns]), truth)
    return scaler, fitted


def out_of_fold(data: TrainingData, features: Sequence[str], folds: int, c: float = 1.0) -> np.ndarray:
    """Each row's probability from the model fitted on the other folds' conversations."""
    columns = [ALL_FEATURES.index(name) for name in features]
    probabilities = np.zeros(len(data.truth))
    for train, held_out in cv_folds(data, folds):
        scaler, fitted = _fit(data.table[train], data.truth[train], columns, c)
        probabilities[held_out] = fitted.predict_proba(scaler.transform(data.table[held_out][:, columns]))[:, 1]
    return probabilities


def turn_f1(picked: np.ndarray, relevant: np.ndarray) -> float:
    """F1 of one turn's cited statements (boolean masks): 0 where nothing relevant is cited."""
    tp = float((picked & relevant).sum())
    return 2 * tp / (picked.sum() + relevant.sum()) if tp else 0.0


def _turn_rows(qids: Sequence[str]) -> list[np.ndarray]:
    """The row indices of each turn, in the order of first appearance."""
    index: dict[str, list[int]] = {}
    for i, qid in enumerate(qids):
        index.setdefault(qid, []).append(i)
    return [np.array(rows) for rows in index.values()]


def mean_turn_f1(probabilities: np.ndarray, truth: np.ndarray, qids: Sequence[str], threshold: float,
                 decision: str = "threshold", turns: Sequence[np.ndarray] | None = None) -> float:
    """The mean over turns of F1 of the statements at or above ``threshold`` (0 where nothing is cited), and of the
    most probable one where none is, with ``decision = "at-least-one"``; ``turns``: :func:`_turn_rows` of ``qids``."""
    scores = []
    for rows in _turn_rows(qids) if turns is None else turns:
        scores.append(turn_f1(picked(probabilities[rows], threshold, decision), truth[rows] == 1))
    return float(np.mean(scores))


def best_threshold(probabilities: np.ndarray, truth: np.ndarray, qids: Sequence[str],
                   decision: str = "threshold") -> float:
    """The threshold with the best mean per-turn F1 under ``decision`` (ties: the higher threshold)."""
    best, chosen = -1.0, 0.5
    turns = _turn_rows(qids)
    for threshold in sorted({float(p) for p in probabilities}, reverse=True):
        f1 = mean_turn_f1(probabilities, truth, qids, threshold, decision, turns)
        if f1 > best:
            best, chosen = f1, threshold
    return chosen


FINETUNE = ("bi", "cross", "bi+context", "cross+context")


def finetuned_out_of_fold(data: TrainingData, turns: Mapping[str, PtkbTurn], finetune: str, base: str, epochs: int,
                          folds: int, seed: int = 0) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The rows' (turn text, statement) pairs and each row's score by ``base`` fine-tuned (``finetune``: an
    architecture of :data:`FINETUNE`) on the other folds' conversations (folds grouped by conversation)."""
    from ikatkit.rank.ptkb_finetune import FineTuned

    architecture, context = finetune.split("+")[0], finetune.endswith("+context")
    pairs = [pair for qid in dict.fromkeys(data.qids) for pair in finetuned_pairs(turns[qid], context)]
    scores = np.zeros(len(pairs))
    for train, held_out in cv_folds(data, folds):
        scorer = FineTuned.train(architecture, base, [pairs[i] for i in train], data.truth[train].tolist(), epochs,
                                 seed)
        scores[held_out] = scorer.score([pairs[i] for i in held_out])
    return pairs, scores


def check_options(features: str, finetune: str | None, epochs: int, decision: str) -> None:
    """One IkatError for training options that do not go together (before any model is loaded)."""
    if features not in FEATURE_SETS or (features == "none" and not finetune):
        raise IkatError(f"unknown feature set {features!r}" if features not in FEATURE_SETS else
                        "the feature set none leaves only a fine-tuned model's score", where="--features",
                        fix=f"use one of {[f for f in FEATURE_SETS if f != 'none']}, or --finetune with none")
    if finetune is not None and finetune not in FINETUNE:
        raise IkatError(f"unknown fine-tuning {finetune!r}", where="--finetune", fix=f"use one of {list(FINETUNE)}")
    if decision not in DECISIONS:
        raise IkatError(f"unknown decision {decision!r}", where="--decision", fix=f"use one of {list(DECISIONS)}")
    if finetune and epochs < 1:
        raise IkatError(f"{epochs} epochs: a fine-tuning of no epoch is the base model", where="--epochs",
                        fix="give 1 or more, or --finetune none")


def train_model(topics: Topics, queries: Mapping[str, str], ranker: Ranker, kind: str, model: str,
                features: str = "responses", folds: int = 5, c: float = 1.0, finetune: str | None = None,
                epochs: int = 1, seed: int = 0, decision: str = "at-least-one") -> PtkbModel:
    """Fit the logistic model on the labelled turns of ``topics`` over the feature set ``features``
    (:data:`FEATURE_SETS`) and choose its threshold under ``decision`` (:data:`DECISIONS`) by ``folds``-fold
    cross-validation grouped by conversation.

    With ``finetune`` (:data:`FINETUNE`), ``model`` fine-tuned on the labelled pairs for ``epochs`` adds the
    ``finetuned`` feature: the logistic model learns it from each row's out-of-fold score (the model fine-tuned
    on the other folds' conversations) and reads, once trained, the score of the model fine-tuned on them all."""
    from ikatkit.rank.ptkb_finetune import FineTuned

    check_options(features, finetune, epochs, decision)
    names = FEATURE_SETS[features] + (("finetuned",) if finetune else ())
    data = training_data(topics, queries, ranker)
    spec, scorer = None, None
    if finetune:
        pairs, scores = finetuned_out_of_fold(data, topic_turns(topics, queries), finetune, model, epochs, folds,
                                              seed)
        table = data.table.copy()
        table[:, ALL_FEATURES.index("finetuned")] = scores
        data = replace(data, table=table)
        scorer = FineTuned.train(finetune.split("+")[0], model, pairs, data.truth.tolist(), epochs, seed)
        spec = {"architecture": scorer.architecture, "context": finetune.endswith("+context"), "epochs": epochs,
                "seed": seed, "base": model}
    return fit_model(data, names, kind, model, folds, c, decision, {"topics": str(topics.path or "")}, spec, scorer)


def fit_model(data: TrainingData, names: Sequence[str], kind: str, model: str, folds: int = 5, c: float = 1.0,
              decision: str = "at-least-one", stated: Mapping[str, Any] | None = None,
              finetuned: dict[str, Any] | None = None, scorer: Any = None) -> PtkbModel:
    """The logistic model over ``names`` fitted on every row of ``data``, its threshold chosen under ``decision``
    on the out-of-fold probabilities of ``folds``-fold cross-validation grouped by conversation; ``stated``: what
    ``trained_on`` says beside the data's counts."""
    names = tuple(names)
    held_out = out_of_fold(data, names, folds, c)
    thresholds = {rule: best_threshold(held_out, data.truth, data.qids, rule) for rule in THRESHOLD_RULES}
    scaler, fitted = _fit(data.table, data.truth, [ALL_FEATURES.index(name) for name in names], c)
    trained_on = {**(stated or {}), "fingerprint": data.fingerprint, "feature_set": _set_name(names),
                  "turns": len(set(data.qids)), "conversations": len(set(data.groups)), "statements": len(data.truth),
                  "relevant": int(data.truth.sum()), "folds": len(cv_folds(data, folds)), "C": c,
                  "thresholds": thresholds}
    if reads_ranking(names):
        trained_on["ranked"] = list(RANKED)  # how the ranked_* features were computed: loading checks it
    return PtkbModel(kind, model, names, tuple(float(v) for v in scaler.mean_), tuple(float(v) for v in scaler.scale_),
                     tuple(float(w) for w in fitted.coef_[0]), float(fitted.intercept_[0]),
                     thresholds[decision if decision in THRESHOLD_RULES else "at-least-one"],
                     trained_on, finetuned, decision, scorer)


def _set_name(names: tuple[str, ...]) -> str:
    """The name of the feature set of ``names`` (without the fine-tuned score), or the names themselves."""
    bare = tuple(n for n in names if n != "finetuned")
    return next((name for name, members in FEATURE_SETS.items() if members == bare), "+".join(bare))
