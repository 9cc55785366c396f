"""The eval, eval-ptkb, compare and report commands on the real iKAT 2023 data."""

from __future__ import annotations

import json

import pytest

from ikatkit.cli import main
from ikatkit.evaluate.ptkb import evaluate_ptkb
from ikatkit.runs.io import write_run
from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult
from ikatkit.topics import load_topics


def test_eval_command_reproduces_every_published_figure(ikat2023, tmp_path, capsys):
    published = json.loads((ikat2023 / "reference_run" / "splade_deberta_perf.json").read_text())
    out = tmp_path / "eval.json"
    assert main(["eval", str(ikat2023 / "reference_run" / "splade_deberta_run.json"), "--qrels",
                 str(ikat2023 / "qrels.txt"), "--measures", *published, "--format", "json", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["evaluated"] == 176 and result["missing"] == [] and "per_query" not in result
    assert set(result["mean"]) == set(published)
    for name, value in published.items():
        assert abs(result["mean"][name] - value) < 1e-6, name
    assert "176 judged turns evaluated, 0 judged turns missing" in capsys.readouterr().err


def test_eval_command_rejects_unknown_measure_and_bad_qrels(ikat2023, tmp_path, capsys):
    run = str(ikat2023 / "reference_run" / "splade_deberta_run.json")
    assert main(["eval", run, "--qrels", str(ikat2023 / "qrels.txt"), "--measures", "nDCG@5", "foo@3"]) == 2
    assert "unknown measure 'foo@3'" in capsys.readouterr().err
    bad = tmp_path / "qrels.txt"
    bad.write_text("9-1_3 0 clueweb22-en0000-00-00251:12 one\n")
    assert main(["eval", run, "--qrels", str(bad)]) == 2
    assert "qrels.txt (line 1): expected 'qid 0 docid grade'" in capsys.readouterr().err


def test_per_query_measures_keep_the_asked_order_in_every_process(demo_dir, tmp_path):
    """ir-measures yields a turn's measures in an order that follows string hashing; the per-query output lists
    them in the order asked, so `eval --per-query` prints the same bytes whatever PYTHONHASHSEED is."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from runs_gold import gold_run

    write_run(gold_run(load_topics(demo_dir / "topics.json")), tmp_path / "gold.json", "2023")
    command = [sys.executable, "-m", "ikatkit.cli", "eval", "gold.json", "--qrels", str(demo_dir / "qrels.txt"),
               "--format", "json", "--per-query"]
    src = str(Path(__file__).resolve().parents[1] / "src")
    outputs = [subprocess.run(command, capture_output=True, text=True, check=True, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": src, "PYTHONHASHSEED": seed}).stdout
               for seed in ("1", "2")]
    assert outputs[0] == outputs[1]
    result = json.loads(outputs[0])
    assert all(list(values) == list(result["mean"]) for values in result["per_query"].values())


def _ptkb_run(topics) -> tuple[Run, dict[str, dict[str, float]]]:
    """A run whose PTKB provenance puts one irrelevant statement first, then the gold ones in reverse."""
    run, rankings = Run("ptkb-test", "automatic"), {}
    for turn in topics:
        keys = list(reversed(turn.ptkb_provenance))
        others = [k for k in topics.conversation_of(turn.qid).ptkb if k not in keys]
        keys = others[:1] + keys
        refs = [PtkbRef(k, float(len(keys) - i), topics.conversation_of(turn.qid).ptkb[k]) for i, k in enumerate(keys)]
        response = Response(1, "a response", [PassageRef("clueweb22-en0000-00-00251:12", 1.0, "", True)], refs)
        run.turns.append(TurnResult(turn.qid, [response]))
        rankings[turn.qid] = {r.key: r.score for r in refs}
    return run, rankings


@pytest.mark.parametrize("fmt", ["2023", "2025"])
def test_eval_ptkb_command_reads_the_runs_ptkb_provenance(ikat2023, tmp_path, fmt):
    topics_path = ikat2023 / "test_topics.json"
    run, rankings = _ptkb_run(load_topics(topics_path))
    path = tmp_path / f"run.{'jsonl' if fmt == '2025' else 'json'}"
    write_run(run, path, fmt, topics=load_topics(topics_path))
    expected = evaluate_ptkb(rankings, ikat2023 / "ptkb_qrels.nist.txt")
    assert 0.2 < expected.mean["nDCG@5"] < 0.25 and len(expected.evaluated) == 98
    out = tmp_path / "ptkb.json"
    args = ["eval-ptkb", str(path), "--qrels", str(ikat2023 / "ptkb_qrels.nist.txt"), "--format", "json",
            "--out", str(out)]
    if fmt == "2025":  # 2025 runs name PTKB statements by text and carry no scores: order and topics decide
        assert main(args) == 2
        args += ["--topics", str(topics_path)]
    assert main(args) == 0
    got = json.loads(out.read_text())
    assert got["evaluated"] == 98
    assert got["mean"] == pytest.approx(expected.mean, abs=1e-12)
