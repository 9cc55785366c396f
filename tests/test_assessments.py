"""NIST's assessments of the 2025 interactive runs (eval-dialogues): the released forms, a fixture cut from
topic1-1.final (tests/data/nist-assessments/README.md), an LLM judge's plumbing and agreement with NIST."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from conftest import IKAT_DATA
from ikatkit.cli import main
from ikatkit.errors import IkatError
from ikatkit.evaluate.assessments import Form, read_assessments, read_form, read_forms, run_means
from ikatkit.evaluate.dialogue_judge import dialogue_agreement, parse_value, transcript

FIXTURE = Path(__file__).parent / "data" / "nist-assessments" / "topic1-1.final"
GUIDELINES = IKAT_DATA / "2025-released" / "guidelines"


@pytest.fixture(scope="module")
def forms() -> dict[str, Form]:
    if not (GUIDELINES / "ikat-dialog-v1.json").exists():
        pytest.skip(f"the 2025 release not found at {GUIDELINES} (set IKAT_DATA)")
    return read_forms([GUIDELINES])


def test_released_forms_read_as_released(forms) -> None:
    with pytest.raises(json.JSONDecodeError):  # the released file is not strict JSON: the reader copes
        json.loads((GUIDELINES / "ikat-dialog-v1.json").read_text(encoding="utf-8"))
    dialog, fragment = forms["ikat-dialog-v1"], forms["ikat-fragment-v1"]
    assert [q.id for q in dialog.scales] == ["mixed-initiative-strategies", "personalization",
                                             "information-flow-and-coherence", "trustworthiness",
                                             "overall-user-satisfaction"]
    assert [q.id for q in fragment.scales] == ["engagement", "relevance-and-usefulness", "overall-subtopic-quality"]
    satisfaction = dialog.question("overall-user-satisfaction")
    assert [satisfaction.value(o) for o in satisfaction.options] == [5, 4, 3, 2, 1]
    assert dialog.question("rater-confidence").value("Low confidence") == 1
    assert fragment.question("relevance-and-usefulness").value("fully meets") == 5


def test_fixture_entries_and_run_means(forms) -> None:
    units = read_assessments([FIXTURE], forms)
    assert [(u.form, [t.turn for t in u.turns]) for u in units] == [
        ("ikat-dialog-v1", [1, 2, 3, 4, 5, 6, 7])] + [("ikat-fragment-v1", [n]) for n in range(1, 6)]
    dialogue = units[0]
    # the labels as released, mapped by hand on the form's option lists (first option = 5)
    assert dialogue.labels["mixed-initiative-strategies"] == "Purely Reactive"
    assert dialogue.values == {"mixed-initiative-strategies": 1, "personalization": 2,
                               "information-flow-and-coherence": 5, "trustworthiness": 4,
                               "overall-user-satisfaction": 4, "rater-confidence": 3}
    assert dialogue.turns[-1].text is None and dialogue.turns[3].rubric_score == 4
    means = run_means(units, forms)["cfda-adarewriter-chiq-llm4cs-splade"]
    # relevance: Highly meets (4), Highly meets, Fully Meets (5), Highly meets, Fully Meets -> 22 / 5
    assert means["relevance-and-usefulness"] == pytest.approx(22 / 5)
    assert means["engagement"] == pytest.approx((3 + 2 + 3 + 3 + 4) / 5)


def test_bad_files_name_file_line_and_field(forms, tmp_path: Path) -> None:
    entries = json.loads(FIXTURE.read_text(encoding="utf-8"))
    entries[1]["judgment"]["engagement"] = "Superb"
    bad = tmp_path / "topic1-1.final"
    bad.write_text(json.dumps(entries, indent=2))
    with pytest.raises(IkatError) as err:
        read_assessments([tmp_path], forms)
    assert "judgment.engagement" in str(err.value) and "topic1-1.final" in str(err.value)
    line = [i for i, text in enumerate(bad.read_text().splitlines(), 1) if text == "  {"][1]  # the second entry
    assert f"line {line}" in str(err.value)
    broken = tmp_path / "form.json"
    broken.write_text('{"label": "x",\n "questions": [}')
    with pytest.raises(IkatError, match="line 2"):
        read_form(broken)


def test_agreement_against_sklearn(forms, tmp_path: Path) -> None:
    units = read_assessments([FIXTURE], forms)
    fragments = [u for u in units if u.form == "ikat-fragment-v1"]
    nist = [u.values["engagement"] for u in fragments]  # 3, 2, 3, 3, 4
    judge = [3, 3, 1, 3, None]
    judged = [{"engagement": v} for v in judge]
    report = dialogue_agreement(fragments, judged, forms, bootstrap=50)["engagement"]
    assert report["units"] == 5 and report["no_label"] == 1
    assert report["exact"] == pytest.approx(2 / 4) and report["within_one"] == pytest.approx(3 / 4)
    assert report["weighted_kappa"] == pytest.approx(cohen_kappa_score(nist[:4], judge[:4], weights="quadratic"))
    assert report["kappa"] == pytest.approx(cohen_kappa_score(nist[:4], judge[:4]))
    # the same labels from a file through the command
    labels = tmp_path / "judge.jsonl"
    labels.write_text("".join(json.dumps({"run": u.run, "topic": u.topic, "form": u.form,
                                          "turns": [t.turn for t in u.turns], "values": j}) + "\n"
                              for u, j in zip(fragments, judged)))
    out = tmp_path / "report.json"
    assert main(["eval-dialogues", str(FIXTURE), "--forms", str(GUIDELINES), "--level", "fragment",
                 "--judged", str(labels), "--bootstrap", "50", "--format", "json", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["agreement"]["engagement"]["exact"] == pytest.approx(0.5)


def test_judge_plumbing_with_bundled_smollm2(forms, tmp_path: Path) -> None:
    """The command with the bundled 135M model, behind a real llama.cpp server where llama-cpp-python is installed
    (else through transformers), on one fragment's three questions (its values mean little: see
    docs/nist-assessments.md)."""
    import importlib.util
    from contextlib import nullcontext

    from ikatkit.llm.server import llama_cpp_server

    labels, out = tmp_path / "labels.jsonl", tmp_path / "report.json"
    served = importlib.util.find_spec("llama_cpp") is not None
    with llama_cpp_server("bundled:smollm2", ready_timeout=90) if served else nullcontext() as url:
        config = tmp_path / "judge.json"
        config.write_text(json.dumps({"backend": "openai", "model": "smollm2", "base_url": url} if served else
                                     {"backend": "transformers", "model": "bundled:smollm2"}))
        assert main(["eval-dialogues", str(FIXTURE), "--forms", str(GUIDELINES), "--level", "fragment", "--limit",
                     "1", "--llm-config", str(config), "--cache", str(tmp_path / "c"), "--labels-out", str(labels),
                     "--bootstrap", "10", "--format", "json", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["llm"]["misses"] == 3 and report["units"] == 1
    values = json.loads(labels.read_text())["values"]
    assert sorted(values) == ["engagement", "overall-subtopic-quality", "relevance-and-usefulness"]
    assert all(v is None or 1 <= v <= 5 for v in values.values())
    assert report["llm"]["parse_fallbacks"] == sum(v is None for v in values.values())
    assert sum(r["units"] for r in report["agreement"].values()) == 3


def test_parse_and_transcript(forms) -> None:
    assert [parse_value(t, 5) for t in ("4", "Rating: 2.", "0", "6", "3.5", "none")] == [4, 2, None, None, None, None]
    dialogue = read_assessments([FIXTURE], forms)[0]
    text = transcript(dialogue.turns)
    assert text.count("User: ") == 7 and text.count("Assistant: ") == 6  # the farewell has no answer


def test_dialogue_means_per_user_type_with_coverage(forms, tmp_path: Path) -> None:
    """2026 entries name their user type: the fixture's dialogue as u1 on conversation 1-1 and as u2 on 1-1 and on a
    second conversation with the best personalization label (5): u1 covers 1 of the run's 2 conversations with
    personalization 2 (the fixture's label), u2 both with (2 + 5) / 2; a 2025 entry (no user) is one error."""
    entries = json.loads(FIXTURE.read_text(encoding="utf-8"))
    dialogue = entries[0]
    best = forms["ikat-dialog-v1"].question("personalization").options[0]
    other = {**dialogue, "topic": "1-2", "judgment": {**dialogue["judgment"], "personalization": best}}
    typed = [{**dialogue, "user_type": "u1"}, {**dialogue, "user_type": "u2"}, {**other, "user_type": "u2"}]
    path = tmp_path / "topic1-1.final"
    path.write_text(json.dumps(typed))
    out = tmp_path / "types.json"
    assert main(["eval-dialogues", str(path), "--forms", str(GUIDELINES), "--by", "user-type", "--format", "json",
                 "--out", str(out)]) == 0
    table = json.loads(out.read_text())["by_user_type"][dialogue["runtag"]]
    assert {k: (v["dialogues"], v["conversations"], v["coverage"]) for k, v in table.items()} == {
        "u1": (1, 2, 0.5), "u2": (2, 2, 1.0)}
    assert table["u1"]["mean"]["personalization"] == 2 and table["u2"]["mean"]["personalization"] == 3.5
    assert main(["eval-dialogues", str(FIXTURE), "--forms", str(GUIDELINES), "--by", "user-type"]) == 2
