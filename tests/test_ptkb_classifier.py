"""The trained PTKB model of rank_ptkb and classify_ptkb: trained on a few 2023 train conversations (the full
training and the table are documented commands: docs/ptkb-classification.md)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ikatkit.cli import main
from ikatkit.digest import file_digest
from ikatkit.errors import IkatError
from ikatkit.pipelines import load_config
from ikatkit.pipelines.record import TurnRecord, records_for
from ikatkit.pipelines.runner import run_pipeline
from ikatkit.stages.core import ClassifyPtkb, RankPtkb
from ikatkit.rank.base import RankerBase, history_texts, rank_ptkb
from ikatkit.rank.ptkb_model import (ALL_FEATURES, FEATURE_SETS, PtkbModel, PtkbTurn, best_threshold, cv_folds,
                                     feature_table, mean_turn_f1, out_of_fold, topic_turns, train_model,
                                     training_data)
from ikatkit.topics import load_topics


@pytest.fixture(scope="module")
def train_slice(labelled_train) -> Path:
    """The first four labelled conversations of the 2023 train topics."""
    return labelled_train(4)


@pytest.fixture(scope="module")
def trained(train_slice: Path, ranker: RankerBase, tmp_path_factory) -> tuple[PtkbModel, Path]:
    topics = load_topics(train_slice)
    model = train_model(topics, topics.queries("raw"), ranker, "bi-encoder", "bundled:minilm", folds=2)
    path = tmp_path_factory.mktemp("model") / "ptkb-model.json"
    model.save(path)
    return model, path


class TableRanker(RankerBase):
    """A unit-test double: scores looked up in a hand-written table."""

    def __init__(self, table: dict[tuple[str, str], float]) -> None:
        super().__init__(cache=False)
        self.table = table

    def _score_unique(self, pairs: list[tuple[str, str]]) -> list[float]:
        return [self.table[pair] for pair in pairs]


def test_training_is_deterministic_and_round_trips(trained, train_slice: Path, ranker: RankerBase) -> None:
    model, path = trained
    topics = load_topics(train_slice)
    again = train_model(topics, topics.queries("raw"), ranker, "bi-encoder", "bundled:minilm", folds=2)
    assert again == model and PtkbModel.load(path) == model
    assert model.features == FEATURE_SETS["responses"] and 0 < model.threshold < 1
    on = model.trained_on
    assert (on["conversations"], on["folds"], on["feature_set"]) == (4, 2, "responses")
    assert on["turns"] == len(topics.ptkb_qrels()) and on["relevant"] == sum(
        sum(labels.values()) for labels in topics.ptkb_qrels().values())
    # the training data's fingerprint follows the queries
    other = train_model(topics, topics.queries("manual"), ranker, "bi-encoder", "bundled:minilm", "turn", 2)
    assert other.trained_on["fingerprint"] != on["fingerprint"] and other.features == FEATURE_SETS["turn"]


def test_threshold_comes_from_cross_validation_grouped_by_conversation(trained, train_slice: Path,
                                                                       ranker: RankerBase) -> None:
    model, _ = trained
    topics = load_topics(train_slice)
    data = training_data(topics, topics.queries("raw"), ranker)
    folds = cv_folds(data, 2)
    assert len(folds) == 2
    groups = np.array(data.groups)
    for train_rows, held_out in folds:
        assert not set(groups[train_rows]) & set(groups[held_out])  # no conversation on both sides
    assert sorted(np.concatenate([held for _, held in folds]).tolist()) == list(range(len(data.truth)))
    oof = out_of_fold(data, model.features, 2)
    assert model.decision == "at-least-one"  # training's default: the threshold chosen under that rule
    assert model.threshold == best_threshold(oof, data.truth, data.qids, "at-least-one")
    # a hand-computed case: turn a (0.9 relevant, 0.2 not), turn b (0.6 not, 0.1 relevant): mean F1 is 0.5 at
    # 0.9 and 0.6, 1/3 at 0.2, and 2/3 at 0.1 (both turns cite everything: F1 2/3 each)
    p, truth, qids = np.array([0.9, 0.2, 0.6, 0.1]), np.array([1, 0, 0, 1]), ["a", "a", "b", "b"]
    assert mean_turn_f1(p, truth, qids, 0.6) == 0.5 and mean_turn_f1(p, truth, qids, 0.1) == pytest.approx(2 / 3)
    assert best_threshold(p, truth, qids) == 0.1
    # above every probability nothing is cited (F1 0); at least one cites 0.9 in a (F1 1) and 0.6 in b (F1 0)
    assert mean_turn_f1(p, truth, qids, 0.95) == 0.0 and mean_turn_f1(p, truth, qids, 0.95, "at-least-one") == 0.5
    # at 0.7 only b differs: 0.6 cited, not relevant: the same mean either way
    assert mean_turn_f1(p, truth, qids, 0.7) == mean_turn_f1(p, truth, qids, 0.7, "at-least-one") == 0.5


def test_features_by_hand() -> None:
    ptkb = {"1": "late dinners", "2": "a cat", "3": "a bike"}
    rows = {"q1": (0.5, 0.1, 0.2), "q2": (0.1, 0.4, 0.3), "now": (0.3, 0.2, 0.6), "r1": (0.9, 0.0, 0.1)}
    ranker = TableRanker({(q, ptkb[k]): s for q, scores in rows.items() for k, s in zip(ptkb, scores)})
    turn = PtkbTurn("now", [("q1", "r1"), ("q2", "")], ptkb)
    keys, table = feature_table(ranker, turn)
    assert keys == ["1", "2", "3"]
    column = {name: table[:, i].tolist() for i, name in enumerate(ALL_FEATURES)}
    assert column["score"] == [0.3, 0.2, 0.6] and column["reciprocal_rank"] == [0.5, 1 / 3, 1.0]
    assert column["gap_to_best"] == pytest.approx([-0.3, -0.4, 0.0])
    conversation = [(0.5 + 0.1 + 0.3) / 3, (0.1 + 0.4 + 0.2) / 3, (0.2 + 0.3 + 0.6) / 3]
    assert column["conversation"] == pytest.approx(conversation)
    assert column["conversation_gap"] == pytest.approx([c - max(conversation) for c in conversation])
    assert column["conversation_rank"] == [0.5, 1 / 3, 1.0]  # 0.3, 0.2333, 0.3667
    # top 3 of 3 statements: every statement in every turn; led a turn before: "1" (q1) and "2" (q2)
    assert column["persistence"] == [1.0, 1.0, 1.0] and column["led_before"] == [1.0, 1.0, 0.0]
    assert column["response_gap"] == pytest.approx([0.0, -0.9, -0.8])  # the empty response is skipped
    history = [0.3 + 0.8 * 0.5, 0.2 + 0.8 * 0.4, 0.6 + 0.8 * 0.3]  # rank_ptkb's score with 2 history turns
    assert column["history_gap"] == pytest.approx([h - max(history) for h in history])
    # rank_ptkb's ranking with the last 2 responses: r1 alone (the second is empty), at 0.8
    ranked = [0.3 + 0.8 * 0.9, 0.2 + 0.8 * 0.0, 0.6 + 0.8 * 0.1]
    assert column["ranked_score"] == pytest.approx(ranked) and column["ranked_rank"] == [1.0, 1 / 3, 0.5]
    assert column["ranked_gap"] == pytest.approx([r - max(ranked) for r in ranked])
    stage = dict(rank_ptkb(ranker, "now", ptkb, history=history_texts(turn.history, 0, 2), history_weight=0.8))
    assert [stage[key] for key in keys] == pytest.approx(column["ranked_score"])
    _, other = feature_table(ranker, turn, ranked=(1, 0.5))  # the last response alone: empty, so the query's
    assert other[:, ALL_FEATURES.index("ranked_score")].tolist() == column["score"]


def _hand_model(path: Path) -> PtkbModel:
    """score -> sigmoid(2 * (score - 0.5) / 0.5 - 1), threshold 0.15."""
    model = PtkbModel("bi-encoder", "bundled:minilm", ("score",), (0.5,), (0.5,), (2.0,), -1.0, 0.15,
                      {"topics": "hand", "fingerprint": "f00d"})
    model.save(path)
    return model


def test_stages_use_the_model_probabilities(tmp_path: Path) -> None:
    path = tmp_path / "hand.json"
    model = _hand_model(path)
    ptkb = {"1": "late dinners", "2": "a cat", "3": "a bike"}
    ranker = TableRanker({("reflux?", "late dinners"): 0.8, ("reflux?", "a cat"): 0.1, ("reflux?", "a bike"): 0.4})
    p = {key: 1 / (1 + math.exp(-(2 * (s - 0.5) / 0.5 - 1))) for key, s in (("1", 0.8), ("2", 0.1), ("3", 0.4))}
    assert p["3"] > 0.15 > p["2"]  # 0.1978 and 0.0691: "3" is kept, "2" is not
    record = TurnRecord("c_1", "reflux?", [], ptkb, query="reflux?")
    [classified] = ClassifyPtkb(ranker=ranker, classifier=str(path)).transform([record])
    assert classified.ptkb == [("1", pytest.approx(p["1"])), ("3", pytest.approx(p["3"]))]
    assert classified.ptkb_trace["probabilities"] == pytest.approx(p)
    assert classified.ptkb_trace["model"]["threshold"] == 0.15
    record = TurnRecord("c_1", "reflux?", [], ptkb, query="reflux?")
    [ranked] = RankPtkb(ranker=ranker, k=2, classifier=str(path)).transform([record])
    assert [key for key, _ in ranked.ptkb] == ["1", "3"] and ranked.ptkb_trace["stage"] == "rank_ptkb"
    summary = ClassifyPtkb.summary([classified, ranked], None)
    assert summary == {"models": [model.manifest()], "turns": 1, "statements": 3, "kept": 2}
    assert summary["models"][0]["trained_on"]["fingerprint"] == "f00d"
    with pytest.raises(IkatError, match="history_turns and classifier"):
        RankPtkb(ranker=ranker, history_turns=2, classifier=str(path))


def test_at_least_one_cites_the_most_probable_where_none_reaches_the_threshold(tmp_path: Path) -> None:
    threshold = _hand_model(tmp_path / "threshold.json")
    path = tmp_path / "least.json"
    least = replace(threshold, decision="at-least-one").save(path)
    assert PtkbModel.load(path) == least and least.manifest()["decision"] == "at-least-one"
    ptkb = {"1": "late dinners", "2": "a cat", "3": "a bike"}
    low = {("reflux?", "late dinners"): 0.15, ("reflux?", "a cat"): 0.1, ("reflux?", "a bike"): 0.2}
    p3 = 1 / (1 + math.exp(-(2 * (0.2 - 0.5) / 0.5 - 1)))  # 0.0998: every statement is below 0.15
    for model, file, expected in ((threshold, tmp_path / "threshold.json", []), (least, path, [("3", p3)])):
        record = TurnRecord("c_1", "reflux?", [], ptkb, query="reflux?")
        [classified] = ClassifyPtkb(ranker=TableRanker(low), classifier=str(file)).transform([record])
        assert classified.ptkb == [(k, pytest.approx(v)) for k, v in expected], model.decision
    # where some statement reaches the threshold, the two rules choose the same
    high = {**low, ("reflux?", "late dinners"): 0.8}
    assert least.choose(least.ranked(TableRanker(high), PtkbTurn("reflux?", [], ptkb))) == threshold.choose(
        threshold.ranked(TableRanker(high), PtkbTurn("reflux?", [], ptkb)))
    # a file of before the rule was written loads as what it was trained with; an unknown rule is refused
    data = json.loads(path.read_text())
    del data["decision"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert PtkbModel.load(tmp_path / "old.json").decision == "threshold"
    (tmp_path / "odd.json").write_text(json.dumps({**data, "decision": "top-2"}))
    with pytest.raises(IkatError, match="decision 'top-2' is not one of"):
        PtkbModel.load(tmp_path / "odd.json")


def test_records_and_topic_files_give_the_same_choice(trained, train_slice: Path, ranker: RankerBase) -> None:
    model, path = trained
    topics = load_topics(train_slice)
    records = records_for(topics)[:8]
    for record in records:
        record.query = record.utterance
    turns = topic_turns(topics, topics.queries("raw"))
    out = ClassifyPtkb(ranker=ranker, classifier=str(path)).transform(records)
    for record in out:
        assert record.ptkb == model.choose(model.ranked(ranker, turns[record.qid]))
    assert any(len(record.history) >= 3 for record in out)


def test_run_manifest_and_fingerprint_state_the_model(trained, train_slice: Path, tmp_path: Path) -> None:
    model, path = trained
    config = tmp_path / "c.toml"
    config.write_text('name = "c"\n[resources.minilm]\nkind = "bi-encoder"\nmodel = "bundled:minilm"\n'
                      '[[stages]]\nstage = "raw_query"\n[[stages]]\nstage = "classify_ptkb"\n'
                      f'classifier = "{path}"\n')
    outcome = run_pipeline(config, train_slice, tmp_path / "run", validate=False, cache_dir=tmp_path / "cache")
    manifest = json.loads(outcome.manifest_file.read_text())
    [stated] = manifest["classify_ptkb_model"]["models"]
    assert stated["threshold"] == model.threshold
    assert stated["trained_on"]["fingerprint"] == model.trained_on["fingerprint"]
    assert manifest["classify_ptkb_model"]["turns"] == len(load_topics(train_slice))
    parts = json.loads((tmp_path / "run" / "checkpoints" / "fingerprint.json").read_text())["parts"]
    assert parts[f"classifier {path}"] == "sha256:" + file_digest(path)


def test_a_missing_or_corrupt_model_is_one_clear_error(trained, tmp_path: Path) -> None:
    model, path = trained
    bad = tmp_path / "bad.json"
    cases = {"absent": (tmp_path / "absent.json", "PTKB classifier file not found"),
             "folder": (tmp_path, "not a PTKB classifier file"),
             "not JSON": ("{", "not JSON"),
             "old format": (json.dumps({"format": "ikatkit-ptkb-classifier-v1"}), "not a ikatkit-ptkb-model-v2"),
             "field missing": (json.dumps({"format": "ikatkit-ptkb-model-v2"}), "field 'mean' missing or malformed"),
             "weights do not fit": (json.dumps({**json.loads(path.read_text()), "coef": [1.0]}),
                                    "do not fit the weights"),
             "another ranked_* setting": (json.dumps({**json.loads(path.read_text()), "trained_on": {
                 **model.trained_on, "ranked": [3, 0.5]}}), r"ranked_\* features of \(responses, weight\) \[3, 0.5\]")}
    assert model.trained_on["ranked"] == [2, 0.8]
    for name, (content, message) in cases.items():
        if isinstance(content, Path):
            target = content
        else:
            bad.write_text(content)
            target = bad
        with pytest.raises(IkatError, match=message) as err:
            PtkbModel.load(target)
        assert err.value.fix and "train one with `ikatkit train-ptkb-classifier" in err.value.fix, name
    head = 'name = "c"\nrun_type = "manual"\n[resources.enc]\nkind = "cross-encoder"\nmodel = "x"\n'
    config = tmp_path / "c.toml"
    for stage in ("classify_ptkb", "rank_ptkb"):
        config.write_text(head + f'[[stages]]\nstage = "manual_query"\n[[stages]]\nstage = "{stage}"\n'
                                 f'classifier = "{path}"\n')
        with pytest.raises(IkatError, match="trained on a bi-encoder"):
            load_config(config)
        config.write_text(head.replace("cross-encoder", "bi-encoder") + f'[[stages]]\nstage = "{stage}"\n'
                          f'classifier = "{tmp_path / "absent.json"}"\n')
        with pytest.raises(IkatError, match="PTKB classifier file not found"):
            load_config(config)


def test_training_options_that_do_not_go_together_fail_before_any_model_loads(train_slice: Path,
                                                                              tmp_path: Path) -> None:
    """One line naming the option, no traceback, and no model loaded first (MiniLM's load prints its progress)."""
    cases = {("--features", "none", "--finetune", "none"): "--features: the feature set none leaves only",
             ("--finetune", "bi", "--epochs", "0"): "--epochs: 0 epochs"}
    for options, message in cases.items():
        done = subprocess.run([sys.executable, "-m", "ikatkit.cli", "train-ptkb-classifier", str(train_slice),
                               *options, "--out", str(tmp_path / "m.json")], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                                "HF_HUB_DISABLE_PROGRESS_BARS": "0"})  # a load would show its bar
        assert done.returncode != 0 and message in done.stderr, options
        assert "Traceback" not in done.stderr and "Loading weights" not in done.stderr, done.stderr
        assert not (tmp_path / "m.json").exists()


def test_commands_train_and_classify(trained, train_slice: Path, ranker: RankerBase, tmp_path: Path, capsys) -> None:
    model, _ = trained
    out = tmp_path / "m.json"
    assert main(["train-ptkb-classifier", str(train_slice), "--queries", "raw", "--folds", "2",
                 "--finetune", "none", "--out", str(out)]) == 0
    assert PtkbModel.load(out) == model
    assert f"threshold {model.threshold:.4f} (at-least-one)" in capsys.readouterr().out
    cited = tmp_path / "c.json"
    assert main(["classify-ptkb", str(train_slice), "--classifier", str(out), "--queries", "raw",
                 "--out", str(cited)]) == 0
    chosen = json.loads(cited.read_text())
    assert len(chosen) == len(load_topics(train_slice))
    probabilities = {qid: dict(model.ranked(ranker, turn)) for qid, turn in
                     topic_turns(load_topics(train_slice), load_topics(train_slice).queries("raw")).items()}
    for qid, scores in chosen.items():  # those at or above the threshold, or the most probable alone
        above = {k for k, p in probabilities[qid].items() if p >= model.threshold}
        assert set(scores) == (above or {max(probabilities[qid], key=probabilities[qid].get)}), qid


def test_the_commands_choices_are_the_models() -> None:
    """The command line names its choices without importing the model at start-up: they must stay the same."""
    from ikatkit.commands import ptkb_classifier as command
    from ikatkit.rank import ptkb_model

    assert set(command.FEATURES) == set(ptkb_model.FEATURE_SETS) and command.FINETUNE == ptkb_model.FINETUNE
    assert command.DECISIONS == ptkb_model.DECISIONS
    assert command.DEFAULT_MODEL == ptkb_model.DEFAULT


def test_the_model_does_not_depend_on_what_the_embedding_cache_held(train_slice: Path, tmp_path: Path) -> None:
    """Issue 61: on Intel CPUs with AVX-512/AMX a batch's row count changes an embedding's last bits, so a model
    trained through a ranker whose cache held every text embedded in one call (batches of up to 32 texts) differed
    from one trained through a fresh ranker (a turn's few texts a batch), as the CLI's did from the library's."""
    from ikatkit.rank import make_ranker

    topics = load_topics(train_slice)
    queries = topics.queries("raw")
    texts = {text for c in topics.conversations for text in c.ptkb.values()}
    texts |= {text for t in topics for text in (t.utterance, t.response or "") if text}
    warmed = make_ranker("bi-encoder", "bundled:minilm", cache_dir=tmp_path / "warmed")
    warmed.score([(text, text) for text in sorted(texts)])
    fresh = make_ranker("bi-encoder", "bundled:minilm", cache_dir=tmp_path / "fresh")
    models = [train_model(topics, queries, ranker, "bi-encoder", "bundled:minilm", folds=2, decision="at-least-one")
              for ranker in (warmed, fresh)]
    assert models[0] == models[1]
