"""The iKAT 2025 release as the organizers published it: released interactive runs (read, validated, written),
the simulator's recorded judgements as measures, rubrics.json, the 2025 nugget and gold-response files, BLEU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ikatkit.evaluate.responses.data import read_nuggets, read_references, read_response_runs
from ikatkit.evaluate.responses.evaluate import ResponseScorers, evaluate_response_runs
from ikatkit.evaluate.responses.rubrics import read_rubrics
from ikatkit.runs.io import load_records, read_run, write_run
from ikatkit.runs.validate import validate_run

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "ikat"
RELEASED = Path(os.environ.get("IKAT_DATA", SHARED)) / "2025-released"
FIXTURES = Path(__file__).parent / "data" / "ikat2025"  # cut from irlabamsterdam/ikat2025 d1d74ed: see README
ORGA = "orga-llama8b-bm25-minilm-llama8b-v2.jsonl"
UVA = "uva-gpt5mini-no-no-gpt5mini.jsonl"


@pytest.fixture(scope="module")
def released() -> Path:
    if not (RELEASED / "rubrics.json").exists():
        pytest.skip(f"the 2025 release is not at {RELEASED} (set IKAT_DATA)")
    return RELEASED


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("name, closed_book", [(ORGA, False), (UVA, True)])
def test_released_runs_read_and_validate(released, name, closed_book):
    path = released / "interactive-runs" / name
    rows = _rows(path)
    answered = [r for r in rows if r["responses"][0]["text"] is not None]
    assert load_records(path)[0] == "2025-interactive"
    run = read_run(path)
    assert [t.turn_id for t in run.turns] == [r["metadata"]["topic_id"] for r in answered]  # farewells: no turn
    assert run.turns[0].user.rubric == answered[0]["responses"][0]["user_rubrik"]
    assert run.turns[0].user.rubric_score == answered[0]["responses"][0]["user_rubrik_score"]
    report = validate_run(path, released / "2025_test_topics.json")
    assert report.ok and report.fmt == "2025-interactive" and report.turns == len(answered)
    assert bool(report.find("closed-book")) is closed_book
    assert not report.find("missing-turn")  # an interactive run has the turns its users chose


def test_released_rules_catch_what_the_api_refuses(released, tmp_path):
    rows = _rows(released / "interactive-runs" / ORGA)[:3]
    rows[0]["responses"][0]["text"] = "word " * 260
    rows[1]["responses"][0]["citations"]["clueweb22-en0000-00-00000:1"] = 1.0
    rows[2]["metadata"]["topic_id"] = "99-9_1"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = validate_run(bad, released / "2025_test_topics.json")
    assert report.turns_of("over-token-limit") == [rows[0]["metadata"]["topic_id"]]
    assert report.turns_of("citation-not-in-references") == [rows[1]["metadata"]["topic_id"]]
    assert report.turns_of("unknown-turn") == ["99-9_1"] and not report.ok


def test_released_shape_written_as_released(released, tmp_path):
    run = read_run(released / "interactive-runs" / ORGA)
    out = tmp_path / "again.jsonl"
    write_run(run, out, "2025-interactive")
    source = [r for r in _rows(released / "interactive-runs" / ORGA) if r["responses"][0]["text"] is not None]
    written = _rows(out)
    assert len(written) == len(source)
    assert written[0]["responses"][0] == source[0]["responses"][0]
    assert written[0]["references"] == source[0]["references"]
    assert {k: written[0]["metadata"][k] for k in source[0]["metadata"]} == source[0]["metadata"]
    assert validate_run(out, released / "2025_test_topics.json").ok


def _cut(released: Path, tmp_path: Path, turns: set[str]) -> Path:
    rows = [r for r in _rows(released / "interactive-runs" / ORGA) if r["metadata"]["topic_id"] in turns]
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_sim_rubric_measures_by_hand(released, tmp_path):
    # rows 1-1_1..4 and 1-2_1..5 of the orga run record (rubric index in rubrics.json, score):
    # 1-1: (1, 5) (2, 5) (3, 3) (3, 4)          -> best 5 5 4 0 0 0
    # 1-2: (1, 5) (2, 5) (3, 5) (4, 5) (5, 2)   -> best 5 5 5 5 2 0
    path = _cut(released, tmp_path, {f"1-1_{i}" for i in range(1, 5)} | {f"1-2_{i}" for i in range(1, 6)})
    measures = ["SimRubricScore", "SimRubricCoverage", "SimTurnsToCover"]
    reached = evaluate_response_runs(read_response_runs(path), rubrics=released / "rubrics.json",
                                     measures=measures)["orga-llama8b-bm25-minilm-llama8b-v2"]
    assert reached.per_query["1-1"] == pytest.approx({"SimRubricScore": 14 / 3, "SimRubricCoverage": 1.0,
                                                      "SimTurnsToCover": (1 + 1 + 2) / 3})  # the 3 pursued
    assert reached.per_query["1-2"]["SimRubricScore"] == pytest.approx(22 / 5)
    result = evaluate_response_runs(read_response_runs(path), rubrics=released / "rubrics.json", measures=measures,
                                    scorers=ResponseScorers(unreached="zero"))["orga-llama8b-bm25-minilm-llama8b-v2"]
    assert result.per_query["1-1"] == pytest.approx({"SimRubricScore": 14 / 6, "SimRubricCoverage": 3 / 6,
                                                     "SimTurnsToCover": (1 + 1 + 2) / 3})
    assert result.per_query["1-2"] == pytest.approx({"SimRubricScore": 22 / 6, "SimRubricCoverage": 4 / 6,
                                                     "SimTurnsToCover": 1.0})
    assert result.mean == pytest.approx({"SimRubricScore": 3.0, "SimRubricCoverage": 7 / 12,
                                         "SimTurnsToCover": (4 / 3 + 1) / 2})
    strict = evaluate_response_runs(read_response_runs(path), rubrics=released / "rubrics.json", measures=measures,
                                    scorers=ResponseScorers(sim_threshold=4, unreached="zero")
                                    )["orga-llama8b-bm25-minilm-llama8b-v2"]
    assert strict.per_query["1-1"]["SimRubricCoverage"] == pytest.approx(2 / 6)  # 4 is not above 4
    assert strict.per_query["1-1"]["SimTurnsToCover"] == 1.0


def test_sim_measures_need_recorded_judgements(released):
    from ikatkit.evaluate.responses.data import ResponseRun

    result = evaluate_response_runs([ResponseRun("plain", {"1-1_1": "An answer."})], rubrics=released / "rubrics.json",
                                    measures=["SimRubricScore", "Words"])["plain"]
    assert any("records no simulator judgements" in w for w in result.info["warnings"])
    assert result.mean == {"Words": 2.0}  # not computed: absent, never 0


def test_a_run_without_judgements_prints_no_sim_figure(released, tmp_path, capsys):
    from ikatkit.cli import main

    rows = _rows(released / "interactive-runs" / ORGA)[:4]
    for row in rows:
        row["responses"][0].pop("user_rubrik_score")
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["eval-responses", str(bare), "--rubrics", str(released / "rubrics.json"),
                 "--measures", "SimRubricScore", "SimRubricCoverage", "SimTurnsToCover", "Words"]) == 0
    captured = capsys.readouterr()
    assert "Sim" not in captured.out and "\tWords\tall\t" in captured.out
    assert "records no simulator judgements" in captured.err


def test_rubrics_json_as_released(released):
    rubrics = read_rubrics(released / "rubrics.json")
    data = json.loads((released / "rubrics.json").read_text())
    assert sum(len(v) for v in rubrics.values()) == sum(len(v) for v in data.values()) == 92
    assert rubrics["1-2"][4].id == "1-2-r5" and rubrics["1-2"][4].question == "How to lose weight?"


def test_2025_nugget_files():
    nist = read_nuggets(FIXTURES / "nuggets-nist.json")
    assert list(nist) == ["2-1_9", "2-2_7"] and [len(v) for v in nist.values()] == [2, 2]
    assert nist["2-1_9"][0].text == "beans come to us in a very natural state." and nist["2-1_9"][0].grade == 0
    llm = read_nuggets(FIXTURES / "nuggets-LLM.json")
    assert len(llm["9-1_10"]) == 2  # the repeated text once
    gold = read_references(FIXTURES / "gold-response-nist.json")
    assert set(gold) == {"2-2_7", "1-1_3"} and gold["1-1_3"].startswith("It seems that melons")


def test_bleu_is_sacrebleu(tmp_path):
    import sacrebleu

    from ikatkit.evaluate.responses.data import ResponseRun
    from ikatkit.evaluate.responses.scorers import bleu

    gold = read_references(FIXTURES / "gold-response-nist.json")
    answers = {"1-1_3": "Melons, apples and some berries are the best fruits to eat with acid reflux.",
               "2-2_7": "Chardonnay is a dry white wine with apple, pear and butter flavors from oak barrels."}
    values = bleu(list(answers.values()), [gold[q] for q in answers])
    for (q, answer), value in zip(answers.items(), values):
        assert value == pytest.approx(sacrebleu.sentence_bleu(answer, [gold[q]]).score)
        single = sacrebleu.BLEU(effective_order=True).corpus_score([answer], [[gold[q]]]).score
        assert value == pytest.approx(single)  # one sentence: the corpus API agrees
    assert bleu([gold["1-1_3"]], [gold["1-1_3"]]) == [pytest.approx(100.0)]
    result = evaluate_response_runs([ResponseRun("r", answers)], references=FIXTURES / "gold-response-nist.json",
                                    measures=["BLEU"])["r"]
    assert result.mean["BLEU"] == pytest.approx(sum(values) / 2)


class ScriptedUserLlm:
    """The LLM behind ikatkit's simulated user, scripted: grades in the given order, says each question as is."""

    def __init__(self, grades: list[str]) -> None:
        self.grades = list(grades)

    def chat(self, batch: list[list[dict]], **_: object) -> list[str]:
        return [self.grades.pop(0) if "Number:" in messages[-1]["content"] else "" for messages in batch]


def test_simulate_llm_users_record_judgements_as_released(tmp_path):
    """ikatkit's simulator notes the rubric and its 0-5 judgement of each answer in the dump's user_meta (the
    judgement with the next utterance); read as the released runs' user_rubrik/user_rubrik_score, written in the
    released shape; the Sim measures read either."""
    from ikatkit.interactive.messages import AssistantResponse, RunMeta
    from ikatkit.simulate.server import Simulator
    from ikatkit.simulate.users import LlmUser, Persona

    persona = Persona("1_1", "1-1", ("You like tea.",), ("Question one?", "Question two?"))
    sim = Simulator({"1-1": LlmUser(persona, "Tea", ScriptedUserLlm(["2", "5", "4"]))}, {"t": "team"})
    sim.start("team", RunMeta(run_id="r", description="d"), "run")
    for answer in ("Not much.", "A full answer.", "Another full answer."):
        sim.continue_("team", AssistantResponse(run_id="r", response=answer), "run")
    dump = tmp_path / "dump.jsonl"
    dump.write_text(sim.dump("team", "r") + "\n")
    run = read_run(dump)
    assert [(t.turn_id, t.user.rubric, t.user.rubric_score) for t in run.turns] == [
        ("1-1_1", "Question one?", 2), ("1-1_2", "Question one?", 5), ("1-1_3", "Question two?", 4)]
    released = tmp_path / "released.jsonl"
    write_run(run, released, "2025-interactive")
    assert load_records(released)[0] == "2025-interactive"
    rubrics = tmp_path / "rubrics.json"
    rubrics.write_text(json.dumps({"1-1": ["Question one?", "Question two?", "Question three?"]}))
    for path in (dump, released):
        result = evaluate_response_runs(read_response_runs(path), rubrics=rubrics,
                                        measures=["SimRubricScore", "SimRubricCoverage", "SimTurnsToCover"],
                                        scorers=ResponseScorers(unreached="zero"))["r"]
        assert result.per_query["1-1"] == pytest.approx({"SimRubricScore": (5 + 4 + 0) / 3,
                                                         "SimRubricCoverage": 2 / 3, "SimTurnsToCover": 1.5})


def test_cli_validate_eval_responses_and_report_of_released_runs(released, tmp_path, capsys):
    from ikatkit.cli import main

    runs = [str(released / "interactive-runs" / name) for name in (ORGA, UVA)]
    assert main(["validate", runs[1], "--topics", str(released / "2025_test_topics.json")]) == 0
    out = capsys.readouterr().out
    assert "WARNING closed-book" in out and "(2025-interactive run, 100 turns;" in out
    assert main(["eval-responses", *runs, "--rubrics", str(released / "rubrics.json"), "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"orga-llama8b-bm25-minilm-llama8b-v2", "uva-gpt5mini-no-no-gpt5mini"}
    assert {"SimRubricScore", "SimRubricCoverage",
            "SimTurnsToCover"} <= set(result["uva-gpt5mini-no-no-gpt5mini"]["mean"])
    assert main(["report", *runs, "--rubrics", str(released / "rubrics.json"), "--measures", "SimRubricCoverage",
                 "--out", str(tmp_path / "report")]) == 0  # rows of whole dialogues: no turn position
    per_conversation = (tmp_path / "report" / "responses_per_conversation.csv").read_text().splitlines()
    assert len(per_conversation) == 1 + 17


def test_2026_llm_users_follow_the_rubric_protocol_and_record_it_as_released(demo_dir):
    """A 2026 rehearsal's LLM user pursues the conversation's rubrics: answers scored 2, 2, 2 spend the three tries
    on the first rubric and move on, a 5 covers the last one and the user says goodbye; the dump names the user and
    records user_rubrik / user_rubrik_score as the released runs do; every message carries the topic's PTKB."""
    from ikatkit.interactive.messages import AssistantResponse, RunMeta
    from ikatkit.simulate.plan import parse_user_types, play_order
    from ikatkit.simulate.server import Simulator
    from ikatkit.simulate.users import FAREWELL, typed_users
    from ikatkit.topics import load_topics

    topics = load_topics(demo_dir / "topics.json").subset(["demo-1"])
    types = parse_user_types(["u1=clean"])
    rubrics = {"demo-1": ["Which diet suits a runner?", "How much protein a day?"]}
    users = typed_users(topics, play_order(types, ["demo-1"]), llm=ScriptedUserLlm(["2", "2", "2", "5"]),
                        rubrics=rubrics)
    ptkb = list(topics.conversation("demo-1").ptkb.values())
    sim = Simulator(users, {"t": "team"}, ptkb={"demo-1": ptkb}, edition=2026, user_types={types[0].id: "u1"})
    messages = [sim.start("team", RunMeta(run_id="r", description="d"), "run")]
    while not messages[-1].last_response_of_session:
        messages.append(sim.continue_("team", AssistantResponse(run_id="r", response="An answer."), "run"))
    assert [m.utterance for m in messages] == [*rubrics["demo-1"][:1] * 3, rubrics["demo-1"][1], FAREWELL]
    assert all(m.user_meta == {"ptkb": ptkb} and m.user_id == types[0].id for m in messages)
    rows = [json.loads(line) for line in sim.dump("team", "r").splitlines()]
    assert [(r["metadata"]["user_id"], r["metadata"]["topic_id"]) for r in rows] == [
        (types[0].id, f"demo-1_{n}") for n in range(1, 6)]
    said = [r["responses"][0] for r in rows]
    assert [(s["user_rubrik"], s["user_rubrik_score"]) for s in said] == [
        *[(rubrics["demo-1"][0], 2)] * 3, (rubrics["demo-1"][1], 5), (None, None)]
    assert {s["user_meta"]["user_type"] for s in said} == {"u1"}
    run = read_run_rows(rows)
    assert [(t.key, t.user.rubric_score, t.user.user_type) for t in run.turns][-1] == (
        f"{types[0].id}/demo-1_4", 5, "u1")


def read_run_rows(rows: list[dict]):
    from ikatkit.runs.io import from_records

    return from_records([(f"line {n}", row) for n, row in enumerate(rows, start=1)], "interactive")


def test_one_count_of_turns_for_a_released_run(released, tmp_path, capsys):
    """validate, eval-responses, compare and report count the answered rows; the farewells (text null) are no
    turns, and the simulator's rows of whole dialogues are not counted as turns either."""
    from ikatkit.cli import main

    orga = released / "interactive-runs" / ORGA
    rows = _rows(orga)
    turns = sum(1 for r in rows if r["responses"][0]["text"] is not None)
    assert len(rows) - turns == 17 and turns == 106  # one farewell per topic
    topics = ["--topics", str(released / "2025_test_topics.json")]
    assert main(["validate", str(orga), *topics]) == 0
    assert f"(2025-interactive run, {turns} turns;" in capsys.readouterr().out
    assert main(["eval-responses", str(orga), "--rubrics", str(released / "rubrics.json"), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[ORGA[:-6]]["evaluated"] == turns
    assert f"{turns} turns evaluated (and 17 whole dialogues), 0 turns missing" in captured.err
    for command in ("compare", "report"):
        assert main([command, str(orga), "--rubrics", str(released / "rubrics.json"), *topics, "--measures", "Words",
                     "--out", str(tmp_path / command)]) == 0
    assert f"answers {turns} of the {turns} judged turns (0 unranked)" in capsys.readouterr().out
    assert f"answers {turns} of the {turns} judged turns" in (tmp_path / "report" / "report.html").read_text()
