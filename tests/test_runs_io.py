"""Run formats on runs written from the topics' ground truth: round trips, TREC derivation, dict runs, bad files.

Tests taking ``topics`` run twice: on the real 2023 topics (skipped without ../shared) and on the embedded demo
topics (always)."""

from __future__ import annotations

import json

import pytest
from runs_gold import gold_run, turns_in_file

from ikatkit.cli import main
from ikatkit.errors import IkatError
from ikatkit.runs.io import read_run, write_run
from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult
from ikatkit.runs.templates import load_template


@pytest.fixture(scope="module")
def turns(topics_file):
    return turns_in_file(topics_file)


@pytest.mark.parametrize("fmt", ["2023", "2024", "2025", "trec"])
def test_round_trip_is_lossless_and_deterministic(topics, turns, tmp_path, fmt):
    run = gold_run(topics, 2023 if fmt == "trec" else int(fmt))
    path = tmp_path / f"run.{fmt}"
    write_run(run, path, fmt, topics=topics)
    back = read_run(path, topics=topics)
    assert [t.turn_id for t in back.turns] == [qid for qid, _ in turns]
    assert back.trec_ranking() == run.trec_ranking()
    if fmt != "trec":
        assert back.run_type == "manual" and back.run_name == "gold"
        for mine, theirs in zip(run.turns, back.turns):
            assert theirs.turn_id == mine.turn_id
            assert [r.text for r in theirs.responses] == [r.text for r in mine.responses]
            assert [p.key for p in theirs.responses[0].ptkb] == [p.key for p in mine.responses[0].ptkb]
            assert [p.text for p in theirs.responses[0].ptkb] == [p.text for p in mine.responses[0].ptkb]
            assert [(p.id, p.used) for p in theirs.responses[0].passages] == \
                   [(p.id, p.used) for p in mine.responses[0].passages]
    first, keys = turns[0]
    assert [p.key for p in back.turn(first).responses[0].ptkb] == ([] if fmt == "trec" else keys)
    write_run(back, tmp_path / "again", fmt, topics=topics)
    assert (tmp_path / "again").read_bytes() == path.read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary file


def test_official_files_follow_the_templates(topics, turns, tmp_path):
    first_turn, keys = turns[0]
    run = gold_run(topics)
    write_run(run, tmp_path / "r23.json", "2023")
    write_run(run, tmp_path / "r24.json", "2024")
    write_run(run, tmp_path / "r25.jsonl", "2025", topics=topics)
    r23 = json.loads((tmp_path / "r23.json").read_text())
    r24 = json.loads((tmp_path / "r24.json").read_text())
    lines = [json.loads(x) for x in (tmp_path / "r25.jsonl").read_text().splitlines()]
    for data, year in ((r23, 2023), (r24, 2024)):
        sample = load_template(year).samples[0]
        assert list(data) == list(sample)
        assert list(data["turns"][0]["responses"][0]) == list(sample["turns"][0]["responses"][0])
        assert load_template(year).check(data) == []
    assert "eval_response" not in r23 and r24["eval_response"] is True
    assert r23["turns"][0]["responses"][0]["ptkb_provenance"][0] == {
        "id": keys[0], "text": topics.conversation_of(first_turn).ptkb[keys[0]], "score": 1.0}
    assert r24["turns"][0]["responses"][0]["ptkb_provenance"] == [int(k) for k in keys]
    assert len(lines) == len(turns) and all(load_template(2025).check(x) == [] for x in lines)
    first = lines[0]
    assert list(first) == list(load_template(2025).samples[0])
    passages = run.turn(first_turn).responses[0].passages
    assert first["references"] == {p.id: p.score for p in passages}
    assert first["responses"][0]["citations"] == {p.id: p.score for p in passages[:3]}
    statements = topics.conversation_of(first_turn).ptkb
    assert first["responses"][0]["ptkb_provenance"] == [statements[k] for k in keys]


def test_trec_run_is_derived_first_occurrence_wins(tmp_path):
    a, b, c = (f"clueweb22-en0000-00-0000{i}:0" for i in (1, 2, 3))
    run = Run("r1", turns=[TurnResult("9-1_1", [
        Response(1, "x", [PassageRef(a, 3.0), PassageRef(b, 2.0)]),
        Response(2, "y", [PassageRef(b, 9.0), PassageRef(c, 1.0)])])])
    write_run(run, tmp_path / "r.trec", "trec")
    assert (tmp_path / "r.trec").read_text().splitlines() == [
        f"9-1_1 Q0 {a} 1 3.0 r1", f"9-1_1 Q0 {b} 2 2.0 r1", f"9-1_1 Q0 {c} 3 1.0 r1"]
    assert read_run(tmp_path / "r.trec").trec_ranking() == run.trec_ranking()


def test_2025_references_capped_at_1000(tmp_path):
    passages = [PassageRef(f"clueweb22-en0000-00-00000:{i}", 2000.0 - i) for i in range(1200)]
    run = Run("big", turns=[TurnResult("9-1_1", [Response(1, "x", passages, [PtkbRef("1", 1.0, "I like tea.")])])],
              year=2025, team_id="t")
    write_run(run, tmp_path / "big.jsonl", "2025")
    line = json.loads((tmp_path / "big.jsonl").read_text())
    assert len(line["references"]) == 1000 and line["responses"][0]["ptkb_provenance"] == ["I like tea."]


def test_reference_run_dict_is_read(ikat2023):
    run = read_run(ikat2023 / "reference_run" / "splade_deberta_run.json")
    assert len(run.turns) == 332 and run.run_name == "splade_deberta_run"
    first = run.turn("9-1_1").responses[0]
    assert first.text == "" and len(first.passages) == 100
    assert first.passages[0].id == "clueweb22-en0003-71-02158:12"
    assert first.passages[0].score == pytest.approx(-4.968386650085449)
    scores = [p.score for p in first.passages]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("content, where, fix", [
    ("9-1_1 Q0 clueweb22-en0000-00-00000:0 1 1.0\n", "line 1", "6 columns"),
    ("9-1_1 Q0 p 1 1.0 r\n9-1_1 Q0 p2 one 1.0 r\n", "line 2", "not a number"),
    ('{"metadata": {}, "turn_id": "9-1_1"}\n{"turn_id": \n', "line 2", "invalid JSON"),
    ('[1, 2]', None, "not a run"),
    ('{"run_name": "x", "run_type": "automatic", "turns": [{"turn_id": "9-1_1", "responses": "none"}]}',
     "turns[0].responses", "a list"),
    ("", None, "empty"),
])
def test_bad_files_give_one_clear_error(tmp_path, content, where, fix):
    path = tmp_path / "bad.run"
    path.write_text(content)
    with pytest.raises(IkatError) as err:
        read_run(path)
    assert "bad.run" in str(err.value) and fix in str(err.value)
    if where:
        assert where in str(err.value.where)


def test_cli_convert(topics, turns, tmp_path, capsys):
    src = tmp_path / "gold.json"
    write_run(gold_run(topics), src, "2023")
    out = tmp_path / "gold.jsonl"
    assert main(["convert", str(src), "--to", "2025", "--out", str(out), "--team-id", "uva"]) == 0
    assert f"wrote {len(turns)} turns as 2025" in capsys.readouterr().out
    back = read_run(out, topics=topics)
    assert back.team_id == "uva" and back.trec_ranking() == gold_run(topics).trec_ranking()
    first, keys = turns[0]
    assert [p.key for p in back.turn(first).responses[0].ptkb] == keys
    assert main(["convert", str(tmp_path / "nope.json"), "--to", "2023", "--out", str(out)]) == 2


def test_cli_convert_reference_run_to_trec(ikat2023, tmp_path):
    trec = tmp_path / "ref.trec"
    assert main(["convert", str(ikat2023 / "reference_run" / "splade_deberta_run.json"), "--to", "trec",
                 "--out", str(trec)]) == 0
    reference = read_run(ikat2023 / "reference_run" / "splade_deberta_run.json")
    assert len(trec.read_text().splitlines()) == sum(len(t.responses[0].passages) for t in reference.turns)
