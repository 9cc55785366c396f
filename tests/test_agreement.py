"""Matcher agreement with human labels (eval-matcher) and the 2025 rubric measures: readers, their errors,
metrics against scikit-learn / scipy and hand counts, leave-one-conversation-out folds, rubric measures with a
scripted LLM double and one real SmolLM2 call, the cross-encoder matcher's plumbing (an untrained local model)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ikatkit.cli import main
from ikatkit.errors import IkatError
from ikatkit.evaluate.responses import agreement as ag
from ikatkit.evaluate.responses.data import Nugget, ResponseRun, read_response_runs
from ikatkit.evaluate.responses.evaluate import ResponseScorers, evaluate_response_runs
from ikatkit.evaluate.responses.nuggets import CrossEncoderMatcher, LexicalMatcher
from ikatkit.evaluate.responses.rubrics import Rubric, RubricJudge, parse_score, read_rubrics

NUGGETS = {"1_2": [Nugget("[1]", "Tofu and lentils are rich in protein.", 2),
                   Nugget("[2]", "Marathon runners need carbohydrates.", 1)],
           "3_1": [Nugget("[1]", "The Japan Rail Pass covers bullet trains.", 3),
                   Nugget("[2]", "Tickets cost nothing.", 1)]}
RUNS = {"ksu": ResponseRun("ksu", {"1_2": "Tofu and lentils give protein.", "3_1": "Buy a rail pass."}),
        "other_a": ResponseRun("other_a", {"1_2": "Runners need carbohydrates. Tofu has protein.",
                                           "3_1": "The Japan Rail Pass covers the bullet trains."}),
        "other_b": ResponseRun("other_b", {"1_2": "Eat well.", "3_1": "Trains are fast."})}


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_read_labels_and_its_errors(tmp_path):
    good = write(tmp_path, "l.txt", "14_1_2_1_ksu-1\t1\n\n15_3_1_1_uva-3\t0\n")
    labels = ag.read_labels(good)
    assert [(x.hit, x.turn, x.nugget, x.tag, x.human, x.line) for x in labels] == [
        ("14", "1_2", "[1]", "ksu-1", 1, 1), ("15", "3_1", "[1]", "uva-3", 0, 3)]
    assert labels[1].conversation == "3"
    for text, line in (("14_1_2_1_ksu-1\t1\n14_1_2_ksu-1\t1\n", "line 2"), ("14_1_2_1_ksu-1 1\n", "line 1"),
                       ("14_1_2_1_ksu-1\t2\n", "line 1")):
        with pytest.raises(IkatError, match=line) as err:
            ag.read_labels(write(tmp_path, "bad.txt", text))
        assert "bad.txt" in str(err.value)
    absent = ag.read_labels(write(tmp_path, "n.txt", "1_1_2_1_ksu-1\t1\n1_1_2_9_ksu-1\t0\n"))
    with pytest.raises(IkatError, match=r"line 2.*nugget \[9\] of turn 1_2"):
        ag.check_nuggets(absent, NUGGETS, "nuggets.json")
    with pytest.raises(IkatError, match=r"line 1.*turn 9_9"):
        ag.check_nuggets(ag.read_labels(write(tmp_path, "t.txt", "1_9_9_1_ksu-1\t1\n")), NUGGETS, "nuggets.json")


def test_tags_map_by_name_by_fit_or_fail(tmp_path):
    path = write(tmp_path, "l.txt", "1_1_2_1_ksu-1\t1\n2_3_1_1_ksu-1\t0\n"
                                    "3_1_2_1_uva-3\t1\n3_1_2_2_uva-3\t1\n4_3_1_1_uva-3\t1\n"
                                    "4_3_1_2_uva-3\t0\n5_3_1_1_nii-1\t1\n")
    labels = [x for x in ag.read_labels(path) if x.tag != "nii-1"]
    mapped = ag.map_tags(labels, RUNS, NUGGETS, path)
    assert (mapped["ksu-1"].run, mapped["ksu-1"].how) == ("ksu", "name")
    # uva-3: no run is named for it; lexical ROC AUC of its labels: other_a 1 (every supported nugget above the
    # unsupported one), ksu 2.5/3 (marathon nugget ties the unsupported one at 0), other_b 0.5
    assert (mapped["uva-3"].run, mapped["uva-3"].how, mapped["uva-3"].candidates) == ("other_a", "fit", 3)
    assert mapped["uva-3"].fit == 1.0 and mapped["uva-3"].runner_up == ("ksu", pytest.approx(2.5 / 3))
    assert ag.map_tags(labels, RUNS, NUGGETS, path, {"uva-3": "other_b"})["uva-3"].run == "other_b"
    with pytest.raises(IkatError, match="--tag"):
        ag.map_tags(labels, RUNS, NUGGETS, path, {"uva-3": "nowhere"})
    lacking = {"ksu": ResponseRun("ksu", {"1_2": "x"})}
    with pytest.raises(IkatError, match=r"l.txt \(line 2\).*tag ksu-1 maps to no run"):
        ag.map_tags(ag.read_labels(path)[:2], lacking, NUGGETS, path)


def test_agreement_against_sklearn_scipy_and_hand_counts():
    from scipy.stats import kendalltau
    from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

    human = [1, 1, 1, 0, 0, 0, 0, 0, 1, 0]
    predicted = [1, 1, 0, 1, 0, 0, 0, 0, 1, 1]
    runs = ["a"] * 4 + ["b"] * 3 + ["c"] * 3
    result = ag.agreement(human, predicted, runs, bootstrap=200, seed=1)
    # hand counts: TP 3, FN 1, FP 2, TN 4
    assert result.pairs == 10 and result.accuracy == pytest.approx(0.7)
    assert result.precision == pytest.approx(3 / 5) and result.recall == pytest.approx(3 / 4)
    assert result.balanced_accuracy == pytest.approx((3 / 4 + 4 / 6) / 2)
    assert result.balanced_accuracy == pytest.approx(balanced_accuracy_score(human, predicted))
    po, pe = 0.7, 0.4 * 0.5 + 0.6 * 0.5  # observed agreement; chance from the margins (human 4/10, matcher 5/10)
    assert result.kappa == pytest.approx((po - pe) / (1 - pe)) == pytest.approx(cohen_kappa_score(human, predicted))
    assert result.kappa_ci[0] <= result.kappa <= result.kappa_ci[1]
    assert result.runs == {"a": {"pairs": 4, "human": 0.75, "matcher": 0.75},
                           "b": {"pairs": 3, "human": 0.0, "matcher": 0.0},
                           "c": {"pairs": 3, "human": 1 / 3, "matcher": 2 / 3}}
    assert result.run_tau == pytest.approx(kendalltau([0.75, 0, 1 / 3], [0.75, 0, 2 / 3]).statistic) == 1.0


def test_cross_validation_never_tunes_on_the_reported_conversation():
    rng = np.random.default_rng(0)
    conversations = np.repeat(["0", "1", "6", "7"], 25)
    scores = rng.random(100)
    human = (scores + rng.normal(0, 0.2, 100) > 0.6).astype(int)
    predicted, folds = ag.cross_validate(scores, human, conversations)
    assert [f.conversation for f in folds] == ["0", "1", "6", "7"]
    for fold in folds:
        held = conversations == fold.conversation
        assert fold.conversation not in fold.tuned_on and set(fold.tuned_on) | {fold.conversation} == set(conversations)
        assert fold.threshold == ag.best_threshold(scores[~held], human[~held])
        assert (predicted[held] == (scores[held] >= fold.threshold)).all()
        # the held conversation's own labels do not move its threshold
        flipped = human.copy()
        flipped[held] = 1 - flipped[held]
        assert [f.threshold for f in ag.cross_validate(scores, flipped, conversations)[1]
                if f.conversation == fold.conversation] == [fold.threshold]
    with pytest.raises(IkatError, match="two conversations"):
        ag.cross_validate(scores[:5], human[:5], ["0"] * 5)


def test_lexical_matcher_counts_content_words_in_one_window():
    matcher = LexicalMatcher(threshold=0.5)
    nugget = Nugget("[1]", "The Japan Rail Pass covers bullet trains.", 1)  # content words: japan rail pass covers
    # bullet trains (6)
    response = "Japan has fast trains. Food is good. A rail pass covers bullet rides."
    scores = matcher.scores([response, ""], [[nugget], [nugget]])
    # windows: one or two consecutive sentences; the best (sentence 3, or 2+3) has 4 of 6, never 1 and 3 together
    assert scores[0][0] == pytest.approx(4 / 6) and scores[1][0] == 0.0
    assert matcher.support([response], [[nugget]]) == [[1.0]]
    assert LexicalMatcher(0.7).support([response], [[nugget]]) == [[0.0]]


@pytest.fixture(scope="module")
def nli_folder(tmp_path_factory):
    """A three-label cross-encoder built here from the bundled MiniLM, its head untrained: plumbing only (no NLI
    model can be had offline)."""
    import torch
    from sentence_transformers import CrossEncoder

    from ikatkit.models import resolve_model

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("nli") / "nli"
    model = CrossEncoder(resolve_model("bundled:minilm"), num_labels=3)
    model.config.id2label = {0: "contradiction", 1: "entailment", 2: "neutral"}
    model.config.label2id = {v: k for k, v in model.config.id2label.items()}
    model.save(str(folder))
    return str(folder)


def test_cross_encoder_matcher_takes_the_best_windows_entailment(nli_folder):
    from sentence_transformers import CrossEncoder

    matcher = CrossEncoderMatcher(nli_folder, threshold=0.3)
    responses = ["Tofu has protein. Runners need carbohydrates.", ""]
    nuggets = [[Nugget("[1]", "Tofu is rich in protein.", 1), Nugget("[2]", "Runners eat pasta.", 1)],
               [Nugget("[1]", "Trains.", 1)]]
    scores = matcher.scores(responses, nuggets)
    naive = CrossEncoder(nli_folder)
    windows = ["Tofu has protein.", "Runners need carbohydrates.", "Tofu has protein. Runners need carbohydrates."]
    for j, nugget in enumerate(nuggets[0]):
        logits = naive.predict([(w, nugget.text) for w in windows])
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        assert scores[0][j] == pytest.approx(probs[:, 1].max(), abs=1e-5)
    assert scores[1].tolist() == [0.0]
    assert matcher.support(responses, nuggets) == [[float(s >= 0.3) for s in scores[0]], [0.0]]


def test_cross_encoder_without_an_entailment_label_is_refused(tmp_path):
    from sentence_transformers import CrossEncoder

    from ikatkit.models import resolve_model

    CrossEncoder(resolve_model("bundled:minilm"), num_labels=2).save(str(tmp_path / "two"))
    with pytest.raises(IkatError, match="none 'entailment'"):
        CrossEncoderMatcher(str(tmp_path / "two"))


class ScriptedJudge:
    """An LLM double: answers each rubric prompt from a script keyed by (question word, answer word)."""

    backend, model = "script", "judge"

    def __init__(self, script):
        self.script, self.prompts, self.stats = script, [], {"parse_fallbacks": 0}

    def chat(self, batch, max_new_tokens=None):
        self.prompts += batch
        out = []
        for messages in batch:
            text = messages[-1]["content"]
            question = text.split("Question: ", 1)[1].split("\n", 1)[0]
            answer = text.split("Response: ", 1)[1]
            out.append(self.script.get((question.split()[0], answer.split()[0] if answer.split() else ""), "?"))
        return out

    def count_fallback(self, what=""):
        self.stats["parse_fallbacks"] += 1


RUBRICS = {"1-1": [Rubric("1-1-r1", "1-1", "Food for reflux?"), Rubric("1-1-r2", "1-1", "Fruits for reflux?"),
                   Rubric("1-1-r3", "1-1", "Habits for reflux?")],
           "2-1": [Rubric("2-1-r1", "2-1", "Coffee beans?")]}


def test_rubric_measures_with_a_scripted_judge():
    run = ResponseRun("sim", {"1-1_1": "Oatmeal helps.", "1-1_2": "Melons help.", "2-1_1": "Arabica beans.",
                              "9-9_1": "No rubrics here."})
    judge = ScriptedJudge({("Food", "Oatmeal"): "4", ("Food", "Melons"): "2", ("Fruits", "Oatmeal"): "1",
                           ("Fruits", "Melons"): "Score: 3", ("Habits", "Oatmeal"): "garbled",
                           ("Habits", "Melons"): "2", ("Coffee", "Arabica"): "5"})
    result = evaluate_response_runs([run], rubrics=RUBRICS, measures=["RubricCoverage", "RubricScore"],
                                    scorers=ResponseScorers(llm=judge))["sim"]
    assert len(judge.prompts) == 3 * 2 + 1  # every rubric of a topic against every response of its dialogue
    assert judge.stats["parse_fallbacks"] == 1  # "garbled": counted, scored 0
    assert result.info["rubric_scores"] == {"1-1": {"1-1-r1": 4, "1-1-r2": 3, "1-1-r3": 2}, "2-1": {"2-1-r1": 5}}
    assert result.per_query["1-1"] == {"RubricCoverage": pytest.approx(2 / 3), "RubricScore": pytest.approx(3.0)}
    assert result.per_query["2-1"] == {"RubricCoverage": 1.0, "RubricScore": 5.0}
    assert result.mean["RubricCoverage"] == pytest.approx((2 / 3 + 1) / 2)
    assert "9-9" not in result.per_query and any("9-9_1" in w and "rubrics" in w for w in result.info["warnings"])
    assert "Question: Food for reflux?\nResponse: Oatmeal helps." in judge.prompts[0][-1]["content"]


def test_rubric_measures_without_an_llm_are_one_error(tmp_path):
    run = ResponseRun("sim", {"1-1_1": "Oatmeal helps."})
    with pytest.raises(IkatError, match="need an LLM judge"):
        evaluate_response_runs([run], rubrics=RUBRICS, measures=["RubricCoverage"])
    with pytest.raises(IkatError, match="--rubrics"):
        evaluate_response_runs([run], nuggets={"1-1_1": []}, measures=["RubricScore"],
                               scorers=ResponseScorers(llm=ScriptedJudge({})))


def test_rubric_judge_real_smollm2_call(tmp_path):
    from ikatkit.llm import make_llm

    llm = make_llm({"backend": "transformers", "model": "bundled:smollm2", "cache_dir": str(tmp_path / "c")})
    scores = RubricJudge(llm).scores(["What is the capital of France?"], ["Paris is the capital of France."])
    assert len(scores) == 1 and 0 <= scores[0] <= 5
    assert llm.stats["misses"] == 1 and llm.stats["completion_tokens"] >= 1


def test_parse_score():
    assert [parse_score(t) for t in ("4", "Score: 3.", "5: highly relevant", "3.5", "12", "none")] == [
        4, 3, 5, None, None, None]


def test_dump_and_rubric_readers(tmp_path, nuggets_2024):
    line = {"metadata": {"team_id": "t", "run_id": "run-7", "description": "", "extra": {}, "topic_id": "1-1_2"},
            "responses": [{"rank": 1, "user_utterance": "u", "user_meta": {"rubric": "r", "rubric_score": 4},
                           "assistant_text": "Oatmeal helps.", "assistant_citations": [], "assistant_meta": {}}]}
    dump = write(tmp_path, "dump.jsonl", json.dumps(line) + "\n")
    runs = read_response_runs(dump)
    assert [(r.name, r.responses) for r in runs] == [("run-7", {"1-1_2": "Oatmeal helps."})]
    rubrics = read_rubrics(nuggets_2024.parent / "2025-simulation" / "rubrics.csv")
    import csv

    with open(nuggets_2024.parent / "2025-simulation" / "rubrics.csv", encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert sum(len(v) for v in rubrics.values()) == len(rows)
    assert rubrics["1-1"][0].question == "What food is good for stomach acid reflux and some that I should avoid?"
    with pytest.raises(IkatError, match="line 2"):
        read_rubrics(write(tmp_path, "r.csv", '"id","rubrik"\nnot-an-id,"Q?"\n'))


def test_eval_matcher_cli_on_the_dev_labels(nuggets_2024, capsys):
    labels = nuggets_2024 / "human_matching_labels.dev.txt"
    code = main(["eval-matcher", str(labels), "--nuggets", str(nuggets_2024 / "gold_nuggets_human.json"),
                 "--responses", str(nuggets_2024 / "automatic_responses.json"),
                 str(nuggets_2024 / "manual_responses.json"), "--matcher", "lexical", "--threshold", "cv",
                 "--bootstrap", "100", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {"pairs", "accuracy", "balanced_accuracy", "precision", "recall", "kappa", "kappa_ci", "run_tau"} <= set(out)
    assert out["pairs"] == 369  # the README's counts: 369 pairs, 67 supported, conversations 0 1 6 7 8
    assert round(sum(r["human"] * r["pairs"] for r in out["runs"].values())) == 67
    assert sorted(f["conversation"] for f in out["folds"]) == ["0", "1", "6", "7", "8"]
    assert {t: m["run"] for t, m in out["tags"].items() if m["how"] == "name"} == {"ksu-1": "ksu",
                                                                                    "nii-1": "NII_USI_UCL"}
    code = main(["eval-matcher", str(labels), "--nuggets", str(nuggets_2024 / "gold_responses_human.json"),
                 "--responses", str(nuggets_2024 / "automatic_responses.json")])
    assert code == 2 and "passage-span" in capsys.readouterr().err
