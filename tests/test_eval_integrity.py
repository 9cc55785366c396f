"""Evaluation correctness (issue 14): aliases beside their equivalents, trec_eval cut names cut in rank order,
no judged turn is an error, one PTKB tie order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ikatkit.cli import main
from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import evaluate
from ikatkit.evaluate.ptkb import evaluate_ptkb
from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult


def test_an_alias_beside_its_equivalent_gives_both_the_same_value(ikat2023):
    published = json.loads((ikat2023 / "reference_run" / "splade_deberta_perf.json").read_text())
    run = json.loads((ikat2023 / "reference_run" / "splade_deberta_run.json").read_text())
    result = evaluate(run, ikat2023 / "qrels.txt", ["ndcg_cut_5", "nDCG@5", "mrr_1000", "RR(rel=2)", "map",
                                                     "AP(rel=2)"])
    assert result.mean["ndcg_cut_5"] == result.mean["nDCG@5"] == pytest.approx(published["ndcg_cut_5"], abs=1e-9)
    assert result.mean["mrr_1000"] == result.mean["RR(rel=2)"] == pytest.approx(published["mrr_1000"], abs=1e-9)
    assert result.mean["map"] == result.mean["AP(rel=2)"] > 0


def _turn(qid: str, ranking: list[tuple[str, float]]) -> TurnResult:
    return TurnResult(qid, [Response(1, "", [PassageRef(pid, score) for pid, score in ranking])])


def test_trec_eval_cut_names_cut_the_run_in_its_own_order_first():
    # Ranks 10 and 11 tie; the run ranks the non-relevant "doc-z" 10th and the relevant "doc-a" 11th.
    # ir-measures' RR@10 re-sorts the tie by ascending id: "doc-a" would be 10th.
    ranking = [(f"doc-{i}", 2.0 - i / 100) for i in range(9)] + [("doc-z", 1.0), ("doc-a", 1.0), ("doc-b", 0.5)]
    run = Run("ties", turns=[_turn("9-1_1", ranking)])
    qrels = {"9-1_1": {"doc-a": 3, "doc-z": 0}}
    result = evaluate(run, qrels, ["mrr_10", "RR(rel=2)@10", "mrr_1000", "RR(rel=2)"])
    assert result.mean["mrr_10"] == 0.0  # the published convention: cut at 10 in the run's order
    assert result.mean["RR(rel=2)@10"] == 0.1  # ir-measures semantics kept for its own names
    assert result.mean["mrr_1000"] == result.mean["RR(rel=2)"] == pytest.approx(1 / 11)  # recip_rank: doc-z first


@pytest.fixture(params=["ikat2023", "demo"])
def qrels_files(request) -> tuple[Path, Path]:
    """(passage qrels, PTKB qrels): the real 2023 NIST files, then the embedded demo's."""
    if request.param == "demo":
        demo = request.getfixturevalue("demo_dir")
        return demo / "qrels.txt", demo / "ptkb_qrels.txt"
    year = request.getfixturevalue("ikat2023")
    return year / "qrels.txt", year / "ptkb_qrels.nist.txt"


def test_a_run_answering_no_judged_turn_is_an_error(qrels_files, tmp_path, capsys):
    passages, ptkb = qrels_files
    turns, ptkb_turns = (len({line.split()[0] for line in f.read_text().splitlines()}) for f in qrels_files)
    run = Run("other-year", turns=[_turn("0-1_1", [("clueweb22-en0000-00-00000:0", 1.0)])])
    with pytest.raises(IkatError, match=f"the run ranks nothing for any of the {turns} judged turns"):
        evaluate(run, passages)
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"0-1_1": {"clueweb22-en0000-00-00000:0": 1.0}}))
    assert main(["eval", str(path), "--qrels", str(passages)]) == 2
    assert f"the run ranks nothing for any of the {turns} judged turns" in capsys.readouterr().err
    no_ptkb = Run("no-ptkb", turns=[_turn("0-1_1", [("clueweb22-en0000-00-00000:0", 1.0)])])
    with pytest.raises(IkatError, match=f"no PTKB provenance for any of the {ptkb_turns} judged turns"):
        evaluate_ptkb(no_ptkb, ptkb)


def test_eval_ptkb_reads_a_key_score_dict_as_ptkb_rankings(qrels_files, tmp_path, capsys):
    from ikatkit.evaluate.qrels import load_qrels

    qrels = load_qrels(qrels_files[1])
    rankings = {qid: {key: float(grade) for key, grade in judged.items()} for qid, judged in qrels.items()}
    path = tmp_path / "ptkb.json"
    path.write_text(json.dumps(rankings))
    out = tmp_path / "result.json"
    assert main(["eval-ptkb", str(path), "--qrels", str(qrels_files[1]), "--format", "json", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["evaluated"] == len([q for q, j in qrels.items() if any(j.values())])
    assert result["mean"]["nDCG@5"] == pytest.approx(1.0)  # the judgements as scores rank perfectly


def test_tied_ptkb_scores_are_ordered_alike_for_runs_and_dicts():
    qrels = {"9-1_1": {"1": 1, "2": 0, "3": 0}}
    # every statement scores 1.0: the run's order (1, 3, 2) decides, not the keys (trec_eval would put 3, 2, 1)
    tied = [("1", 1.0), ("3", 1.0), ("2", 1.0)]
    run = Run("tied", turns=[TurnResult("9-1_1", [Response(1, "x", [], [PtkbRef(k, s) for k, s in tied])])])
    from_run = evaluate_ptkb(run, qrels, ["RR", "AP"])
    from_dict = evaluate_ptkb({"9-1_1": dict(tied)}, qrels, ["RR", "AP"])
    assert from_run.mean == from_dict.mean == {"RR": 1.0, "AP": 1.0}


def test_the_demo_evaluates_ptkb_through_the_same_function():
    import inspect

    from ikatkit.pipelines import demo

    source = inspect.getsource(demo.run_demo)
    assert "evaluate_ptkb(outcome.run," in source and ".score for p in" not in source
