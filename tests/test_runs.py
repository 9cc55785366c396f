"""Run formats and the validator on runs written from the real 2023 topics."""

from __future__ import annotations

import copy
import json
import math

import pytest

from ikatkit.errors import IkatError
from ikatkit.runs.io import read_run, write_run
from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult
from ikatkit.runs.validate import validate_run
from ikatkit.topics import load_topics


@pytest.fixture(scope="module")
def topics(ikat2023):
    return load_topics(ikat2023 / "test_topics.json")


def gold_run(topics, year: int = 2023) -> Run:
    """A run made of the topics' own ground truth: canonical response, provenance passages, gold PTKB."""
    turns = []
    fallback = next(p for t in topics for p in t.response_provenance)  # a real passage, for turns citing none
    for turn in topics:
        ptkb = topics.conversation_of(turn.qid).ptkb
        cited = list(dict.fromkeys(turn.response_provenance)) or [fallback]
        passages = [PassageRef(pid, 10.0 - i, "", i < 3) for i, pid in enumerate(cited)]
        refs = [PtkbRef(k, 1.0 - 0.1 * i, ptkb[k]) for i, k in enumerate(turn.ptkb_provenance)]
        turns.append(TurnResult(turn.qid, [Response(1, turn.response or "No answer.", passages, refs)]))
    return Run("gold", "manual", turns, year, "uva")


@pytest.mark.parametrize("fmt", ["2023", "2024", "2025"])
def test_round_trip_official_formats(topics, tmp_path, fmt):
    run = gold_run(topics, int(fmt))
    path = tmp_path / f"run.{fmt}"
    write_run(run, path, fmt, topics=topics)
    back = read_run(path, topics=topics)
    assert len(back.turns) == 332 and back.run_type == "manual"
    assert back.trec_ranking() == run.trec_ranking()
    first, again = run.turn("9-1_1").responses[0], back.turn("9-1_1").responses[0]
    assert again.text == first.text
    assert [p.key for p in again.ptkb] == ["5", "4", "2"]
    assert [p.used for p in again.passages] == [p.used for p in first.passages]
    write_run(back, tmp_path / "again", fmt, topics=topics)
    assert (tmp_path / "again").read_bytes() == path.read_bytes()


def test_trec_run_is_derived_first_occurrence_wins(tmp_path):
    run = Run("r1", turns=[TurnResult("9-1_1", [
        Response(1, "a", [PassageRef("clueweb22-en0000-00-00001:0", 3.0), PassageRef("clueweb22-en0000-00-00002:0", 2.0)]),
        Response(2, "b", [PassageRef("clueweb22-en0000-00-00002:0", 9.0), PassageRef("clueweb22-en0000-00-00003:0", 1.0)])])])
    write_run(run, tmp_path / "r.trec", "trec")
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert lines == ["9-1_1 Q0 clueweb22-en0000-00-00001:0 1 3.0 r1", "9-1_1 Q0 clueweb22-en0000-00-00002:0 2 2.0 r1",
                     "9-1_1 Q0 clueweb22-en0000-00-00003:0 3 1.0 r1"]
    assert read_run(tmp_path / "r.trec").trec_ranking() == run.trec_ranking()


def test_reference_run_dict_is_read(ikat2023):
    run = read_run(ikat2023 / "reference_run" / "splade_deberta_run.json")
    assert len(run.turns) == 332
    scores = [p.score for p in run.turn("9-1_1").responses[0].passages]
    assert len(scores) == 100 and scores == sorted(scores, reverse=True)


def test_validator_accepts_the_gold_run(topics):
    report = validate_run(gold_run(topics), topics)
    assert report.ok, str(report)
    assert set(report.warnings) == {"empty PTKB provenance"}  # turns whose gold PTKB provenance is empty


BROKEN = {
    "turn of the topics missing from the run": lambda r: r.turns.pop(5),
    "turn id not in the topics": lambda r: setattr(r.turns[0], "turn_id", "99-9_1"),
    "response ranks must strictly increase": lambda r: r.turns[1].responses.append(copy.deepcopy(r.turns[1].responses[0])),
    "empty response text": lambda r: setattr(r.turns[2].responses[0], "text", "  "),
    "passage scores must not increase within a response": lambda r: setattr(r.turns[3].responses[0].passages[-1], "score", 99.0),
    "passage score is NaN or infinite": lambda r: setattr(r.turns[3].responses[0].passages[0], "score", math.nan),
    "duplicate passage id within a response": lambda r: r.turns[4].responses[0].passages.append(
        PassageRef(r.turns[4].responses[0].passages[0].id, -1.0)),
    "passage id is not of the form clueweb22-enXXXX-XX-XXXXX:N": lambda r: setattr(
        r.turns[6].responses[0].passages[0], "id", "clueweb22-en0000-00-00000"),
    "PTKB key 0 (keys start at 1)": lambda r: r.turns[0].responses[0].ptkb.append(PtkbRef("0", 0.1)),
    "PTKB key not in the conversation's PTKB": lambda r: r.turns[0].responses[0].ptkb.append(PtkbRef("42", 0.1)),
    "PTKB statement text differs from the topics'": lambda r: setattr(r.turns[0].responses[0].ptkb[0], "text", "other"),
    "a response needs 1 to 1000 passages": lambda r: setattr(r.turns[7].responses[0], "passages", []),
}


@pytest.mark.parametrize("problem", sorted(BROKEN))
def test_validator_rejects_each_broken_run(topics, problem):
    run = gold_run(topics)
    expected_turn = {"turn of the topics missing from the run": run.turns[5].turn_id,
                     "turn id not in the topics": "99-9_1"}.get(problem)
    BROKEN[problem](run)
    report = validate_run(run, topics)
    assert not report.ok
    assert list(report.errors) == [problem] or (problem == "turn id not in the topics" and problem in report.errors)
    turns = report.errors[problem]
    if expected_turn:
        assert expected_turn in turns
    assert problem in str(report) and "INVALID" in str(report)


def test_validator_checks_passage_ids_and_file_shape(topics, tmp_path, passages_index):
    run = gold_run(topics)
    report = validate_run(run, topics, ids=passages_index)
    assert report.ok, str(report)
    run.turns[0].responses[0].passages[0].id = "clueweb22-en9999-99-99999:0"
    report = validate_run(run, topics, ids=passages_index)
    assert report.errors == {"passage id not in the collection": [run.turns[0].turn_id]}
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"run_name": "x", "run_type": "automatic", "turns": [{"turn_id": "9-1_1"}]}))
    report = validate_run(broken, topics)
    assert report.errors["turn has no response"] == ["9-1_1"]
    broken.write_text(json.dumps({"run_name": "x", "run_type": "automatic",
                                  "turns": [{"turn_id": "9-1_1", "responses": "none"}]}))
    with pytest.raises(IkatError, match="broken.json"):
        read_run(broken)
    report = validate_run(broken, topics)
    assert not report.ok and "broken.json" in str(report)
