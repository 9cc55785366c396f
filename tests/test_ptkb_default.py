"""The shipped PTKB default (issue 62): the configs, `ikatkit ptkb` and `classify-ptkb` use the model that travels
in the wheel, and what configs/interactive_ptkb.toml sends in an iKAT 2026 interactive run (the history: the
system's own earlier answers) is what `ikatkit classify-ptkb` chooses on the same turns and history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import IKAT_DATA
from ikatkit.cli import main
from ikatkit.interactive.driver import run_interactive
from ikatkit.rank import ptkb_model
from serving import serve
from test_interactive_2026 import turn_files
from test_simulate_cli import TOKEN, local_simulator

RELEASED = IKAT_DATA / "2025-released" / "2025_test_topics.json"
ROOT = Path(__file__).resolve().parents[1]


def test_the_default_travels_in_the_package_and_is_small():
    path = ptkb_model.classifier_path(ptkb_model.DEFAULT)
    assert path.is_file() and path.stat().st_size < 2_000_000
    model = ptkb_model.PtkbModel.load(ptkb_model.DEFAULT)
    assert (model.kind, model.model, model.finetuned) == ("bi-encoder", "bundled:minilm", None)
    assert model.trained_on["turns"] == 140  # 42 train turns (provenance) + 98 test turns (NIST qrels)


@pytest.fixture()
def three_turns(tmp_path) -> Path:
    """The first 3 turns of 2025 conversation 6-2 (20 statements), a topic file of its own."""
    if not RELEASED.exists():
        pytest.skip(f"2025 topics not found at {RELEASED} (set IKAT_DATA)")
    conversation = next(c for c in json.loads(RELEASED.read_text()) if str(c["number"]) == "6-2")
    path = tmp_path / "topics.json"
    path.write_text(json.dumps([{**conversation, "responses": conversation["responses"][:3]}]))
    return path


def test_the_interactive_config_sends_the_defaults_choice(three_turns, demo_index, tmp_path, monkeypatch):
    monkeypatch.setenv("IKAT_API_TOKEN", TOKEN)
    sim = local_simulator(["simulate", "--topics", str(three_turns), "--rules", "2026", "--token", TOKEN])
    with serve(sim) as url:
        run_interactive(ROOT / "configs" / "interactive_ptkb.toml", url, "ptkb", tmp_path / "out", index=demo_index,
                        progress=False)
    turns = sorted((t for t in turn_files(tmp_path / "out") if "sent" in t), key=lambda t: t["history_len"])
    assert len(turns) == 3
    ptkb = turns[0]["record"]["ptkb_all"]
    assert len(ptkb) == 20 and all(t["ptkb_source"] == "user_meta" for t in turns)
    for earlier, later in zip(turns, turns[1:]):  # the history is the system's own answers
        assert later["record"]["history"][-1] == [earlier["utterance"], earlier["sent"]["response"]]
    # the same turns as a topic file: the user's utterances, the system's responses
    topics = tmp_path / "session.json"
    topics.write_text(json.dumps([{"number": "6-2", "title": "", "ptkb": ptkb, "turns": [
        {"turn_id": i, "utterance": t["utterance"], "resolved_utterance": "", "response": t["sent"]["response"],
         "ptkb_provenance": [], "response_provenance": []} for i, t in enumerate(turns, start=1)]}]))
    chosen = tmp_path / "chosen.json"
    assert main(["classify-ptkb", str(topics), "--queries", "raw", "--out", str(chosen)]) == 0
    cited = json.loads(chosen.read_text())
    sent = [t["sent"]["meta"]["ptkb_provenance"] for t in turns]
    assert sent == [[ptkb[key] for key in cited[f"6-2_{i}"]] for i in range(1, 4)]
    assert all(sent)  # at least one statement a turn
    probabilities = [t["record"]["ptkb_trace"]["probabilities"] for t in turns]
    assert [sorted(p) for p in probabilities] == [sorted(ptkb)] * 3  # every statement scored, the trace kept
