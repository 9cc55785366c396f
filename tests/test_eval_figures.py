"""Figures that must mean what they say (issue 61): coverage per user type over the conversations each type played,
one computation of the Sim measures with its --unreached said, suggestions for mistyped keys and measures, the MRR
note, another year's qrels or topics refused (and no warning for a correct run over a small index)."""

from __future__ import annotations

import json
import logging

import pytest

from ikatkit.cli import main
from ikatkit.errors import IkatError
from ikatkit.evaluate.measures import parse_measures

from eval_table import eval_table


def _pid(n: int) -> str:
    return f"clueweb22-en0000-00-0000{n}:0"


A, B = "user-a", "user-b"  # types u1 and u2
RUBRICS = {"1-1": ["Q1?", "Q2?"], "2-1": ["Q3?", "Q4?"], "3-1": ["Q5?"]}
# user, conversation, rubric question, its 0-5 score, the cited passage: u1 plays 1-1 and finishes both of its
# rubrics; u2 plays 2-1 (reaches Q3 only) and 3-1 (reaches Q5); nobody plays the other's conversations
TURNS = [(A, "1-1", "Q1?", 5, 1), (A, "1-1", "Q2?", 4, 3), (B, "2-1", "Q3?", 2, 5), (B, "3-1", "Q5?", 5, 9)]
QRELS = (f"rub_1-1_1 {_pid(1)} 2\nrub_1-1_2 {_pid(3)} 1\nrub_2-1_1 {_pid(5)} 2\nrub_2-1_2 {_pid(6)} 2\n"
         f"rub_3-1_1 {_pid(7)} 1\n")


@pytest.fixture
def three(tmp_path):
    """A 2026 dump by hand: 2 user types, 3 conversations, each played by one type; rubrics and rubric qrels."""
    head = {"team_id": "t", "run_id": "r", "description": "d", "extra": {}}
    rows, numbers = [], {}
    for user, conversation, question, score, cited in TURNS:
        n = numbers[(user, conversation)] = numbers.get((user, conversation), 0) + 1
        kind = "u1" if user == A else "u2"
        rows.append({"metadata": {**head, "user_id": user, "topic_id": f"{conversation}_{n}"}, "responses": [{
            "rank": 1, "user_utterance": f"utterance {n}", "user_meta": {"user_type": kind}, "user_rubrik": question,
            "user_rubrik_score": score, "assistant_text": "an answer", "assistant_citations": {_pid(cited): 1.0},
            "assistant_meta": {}}]})
    dump, rubrics, qrels = tmp_path / "dump.jsonl", tmp_path / "rubrics.json", tmp_path / "qrels.txt"
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rubrics.write_text(json.dumps(RUBRICS))
    qrels.write_text(QRELS)
    return dump, rubrics, qrels


def test_coverage_per_user_type_is_over_the_conversations_it_played(three, capsys):
    """By hand: u1 reaches both rubrics of the one conversation it played (2 of 2: 1.0000, was 2 of 5); u2 reaches
    Q3 of 2-1's two and 3-1's one (2 of 3). P@1: u1 cites a judged-relevant passage for both (1, 1), u2 for Q3 (1)
    not for Q5 (0). The organizers' totals (zero) stay over every judged rubric, and the footer says how many of
    them belong to conversations the type never played (u1: 3 of 5, u2: 2 of 5)."""
    dump, rubrics, qrels = three
    base = ["eval", str(dump), "--qrels", str(qrels), "--rubrics", str(rubrics), "--measures", "P@1",
            "--by", "user-type"]
    assert main(base) == 0
    captured = capsys.readouterr()
    table = eval_table(captured.out)
    assert table["u1"] == {"reached": "2", "rubrics": "2", "coverage": "1.0000", "P@1": "1.0000"}
    assert table["u2"] == {"reached": "2", "rubrics": "3", "coverage": "0.6667", "P@1": "0.5000"}
    assert table["all"] == {"reached": "4", "rubrics": "5", "coverage": "0.8000", "P@1": "0.7500"}
    assert "rubrics: those of the conversations each type's users played" in captured.err
    assert main([*base, "--unreached", "zero"]) == 0
    captured = capsys.readouterr()
    table = eval_table(captured.out)
    assert table["u1"] == {"reached": "2", "rubrics": "5", "coverage": "0.4000", "P@1": "0.4000"}
    assert table["u2"] == {"reached": "2", "rubrics": "5", "coverage": "0.4000", "P@1": "0.2000"}
    assert table["all"] == {"reached": "4", "rubrics": "10", "coverage": "0.4000", "P@1": "0.3000"}
    assert "conversations the type never played included (all 5 of 10, u1 3 of 5, u2 2 of 5)" in captured.err
    assert main([*base, "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)["info"]
    assert info["unplayed_rubrics"] == {"all": 5, "u1": 3, "u2": 2}


def test_sim_measures_one_computation_unreached_said(three, capsys):
    """Scores by hand: u1 5 and 4 (both covered), u2 2 (Q3, not covered) and 5 (Q5). Per user type (units): skip
    u1 4.5, u2 3.5; zero over every rubric of the file (5 per user): u1 9/5, u2 7/5. Per dialogue (the run's
    value, mean over its dialogues a/1-1, b/2-1, b/3-1): skip (the default) 4.5, 2, 5 -> 11.5/3; zero 4.5, 1, 5
    -> 3.5. The choice is said on standard error either way."""
    dump, rubrics, _ = three
    base = ["eval-responses", f"r={dump}", "--rubrics", str(rubrics), "--measures", "SimRubricScore",
            "SimRubricCoverage"]
    assert main([*base, "--by", "user-type"]) == 0
    rows = eval_table("\n".join(line.split("\t", 1)[1] for line in capsys.readouterr().out.strip().splitlines()))
    assert rows["u1"] == {"reached": "2", "rubrics": "2", "coverage": "1.0000", "SimRubricScore": "4.5000",
                          "SimRubricCoverage": "1.0000"}
    assert rows["u2"] == {"reached": "2", "rubrics": "3", "coverage": "0.6667", "SimRubricScore": "3.5000",
                          "SimRubricCoverage": "0.5000"}
    assert main([*base, "--by", "user-type", "--unreached", "zero"]) == 0
    rows = eval_table("\n".join(line.split("\t", 1)[1] for line in capsys.readouterr().out.strip().splitlines()))
    assert (rows["u1"]["SimRubricScore"], rows["u2"]["SimRubricScore"]) == ("1.8000", "1.4000")
    for extra, score, said in (([], 11.5 / 3, "--unreached skip"), (["--unreached", "zero"], 3.5, "--unreached zero")):
        assert main([*base, "--format", "json", "--per-query", *extra]) == 0
        captured = capsys.readouterr()
        result = json.loads(captured.out)["r"]
        assert result["mean"]["SimRubricScore"] == pytest.approx(score)
        assert said in captured.err


def test_a_mistyped_top_level_key_is_suggested(demo_dir, tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text('name = "x"\nrun-type = "manual"\n[[stages]]\nstage = "manual_query"\n')
    assert main(["run", str(config), "--topics", str(demo_dir / "topics.json"), "--out", str(tmp_path / "o")]) == 2
    assert "unknown key 'run-type' — fix: did you mean 'run_type'? use only [" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "meant"), [("nDGC@3", "nDCG@3"), ("ndcg@3", "nDCG@3"), ("ndcg_cut_5x", "ndcg_cut_5"),
                                             ("P(rel=2)@1O", None), ("precision@5", "Precision@5")])
def test_a_mistyped_measure_is_suggested(name, meant):
    with pytest.raises(IkatError) as err:
        parse_measures([name])
    assert (f"did you mean {meant!r}" in str(err.value)) if meant else "did you mean" not in str(err.value)


def test_mrr_says_it_is_rel_1_and_names_ikats(caplog):
    with caplog.at_level(logging.WARNING):
        parse_measures(["MRR", "RR(rel=2)", "nDCG@3"])
    assert [r.getMessage() for r in caplog.records] == [
        "'MRR' is ir-measures' RR at rel >= 1 (a passage graded 1 counts as relevant); iKAT reports reciprocal rank "
        "at rel >= 2 (mrr_10 in published results): pass 'RR(rel=2)' for that (0/1 PTKB qrels give the same either "
        "way)"]


# ---------------------------------------------------------------- another year's qrels or topics (issue 61)

def _bm25_runs(ikat2023, passages_index, tmp_path):
    """Two real BM25 runs over the 894 passages the 2023 topics cite, written as 2025 JSONL and 2023 JSON: the
    2023 test topics with each conversation's whole PTKB appended to the utterance (a correct run: 1.65% of its
    top-10 ids judged for their turn, 26.6% judged for some turn), and the 2025 test topics (another year: of its
    top-10 ids on the 10 turn ids the two years share, 25 are judged for some 2023 turn, none for their own)."""
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.topics import load_topics

    searcher = Bm25Searcher(passages_index, threads=1)
    own = load_topics(ikat2023 / "test_topics.json")
    ptkb = {c.id: " ".join(c.ptkb.values()) for c in own.conversations}
    other = load_topics(ikat2023.parent / "2025-released" / "2025_test_topics.json")
    paths = []
    for topics, query, name in ((own, lambda t: f"{t.utterance} {ptkb[t.conversation_id]}", "own.json"),
                                (other, lambda t: t.utterance, "other.json")):
        hits = searcher.batch_search({t.qid: query(t) for t in topics}, 100)
        path = tmp_path / name
        path.write_text(json.dumps({qid: dict(found) for qid, found in hits.items()}))
        paths.append(path)
    return paths


def test_a_correct_run_over_a_small_index_is_not_warned_another_years_is_refused(ikat2023, passages_index,
                                                                                 tmp_path, caplog, capsys):
    own, other = _bm25_runs(ikat2023, passages_index, tmp_path)
    qrels = ikat2023 / "qrels.txt"
    with caplog.at_level(logging.WARNING):
        assert main(["eval", str(own), "--qrels", str(qrels), "--measures", "nDCG@3"]) == 0
    assert not [r for r in caplog.records if "judged in the qrels" in r.getMessage()]
    assert "# means over the 176 judged turns the run has (of 176 in the qrels)" in capsys.readouterr().out
    for command in (["eval", str(other)], ["compare", str(own), str(other)]):  # report: compare_runs as compare
        assert main([*command, "--qrels", str(qrels)]) == 2
        err = capsys.readouterr().err
        assert f"{qrels}: " in err and "the run's turns are not the qrels' turns: it ranks 10 of the 176 judged " \
                                      "turns" in err and "fix: pass the qrels of the run's year and topics" in err


def test_ids_the_qrels_never_judged_are_warned(ikat2023, caplog):
    """A run whose top 10 are ids no turn's judgements hold (another collection), a judged id 31st on each turn."""
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.qrels import load_qrels

    qrels = load_qrels(ikat2023 / "qrels.txt")
    run = {q: {**{f"clueweb22-en9999-00-{n:05d}:0": 50.0 - n for n in range(30)}, next(iter(judged)): 1.0}
           for q, judged in qrels.items()}
    with caplog.at_level(logging.WARNING):
        evaluate(run, qrels, ["nDCG@3"])
    assert [r.getMessage() for r in caplog.records] == [
        "only 0.0% of the run's top-10 ids on its 176 judged turns are judged in the qrels (for any turn): check "
        "that the run and the qrels are of the same collection, year and kind"]


def test_eval_responses_refuses_another_years_topics_and_validate_names_the_years(ikat2023, tmp_path, capsys):
    """A 2025 run of conversations 9-1 and 9-2 (16 of its 20 turn ids are 2023 turn ids too) against the 2023
    topics: validate names both years; eval-responses refuses the 2025 topics for the 2023 reference run's ..."""
    from ikatkit.runs.io import write_run
    from ikatkit.runs.model import PassageRef, Response, Run, TurnResult
    from ikatkit.topics import load_topics

    topics25 = load_topics(ikat2023.parent / "2025-released" / "2025_test_topics.json")
    turns = [TurnResult(t.qid, [Response(1, "An answer.", [PassageRef("clueweb22-en0000-00-00000:0", 1.0, "x",
                                                                      True)])])
             for t in topics25 if t.conversation_id in ("9-1", "9-2")]
    run = tmp_path / "r25.jsonl"
    write_run(Run("r25", turns=turns, year=2025, team_id="t"), run, "2025")
    assert main(["validate", str(run), "--topics", str(ikat2023 / "test_topics.json")]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("ERROR   wrong-topics: another year's topics: a 2025 run, 2023 topics")
    assert main(["eval-responses", str(run), "--topics", str(ikat2023 / "train_topics.json"),
                 "--measures", "Words"]) == 2
    err = capsys.readouterr().err
    assert f"{ikat2023 / 'train_topics.json'}: " in err and "turns of run r25 are not in these 2023 topics" in err


def test_compare_says_which_units_the_sim_means_are_over(three, capsys):
    dump, rubrics, _ = three
    for extra, said in (([], "(--unreached skip)"), (["--unreached", "zero"], "(--unreached zero)")):
        assert main(["compare", f"a={dump}", f"b={dump}", "--rubrics", str(rubrics), "--measures", "SimRubricScore",
                     *extra]) == 0
        assert said in capsys.readouterr().err
