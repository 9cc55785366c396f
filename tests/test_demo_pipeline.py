"""Runner, stages, run files, validator and evaluation on the embedded demo collection: these run everywhere,
without ../shared (the real-data versions are in test_pipelines.py, test_runs_*.py and test_evaluate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import evaluate
from ikatkit.evaluate.ptkb import evaluate_ptkb
from ikatkit.pipelines import run_pipeline
from ikatkit.pipelines.demo import representative_turn, rerun_commands
from ikatkit.pipelines.record import records_for
from ikatkit.runs.io import read_run, write_run
from ikatkit.runs.validate import validate_run
from ikatkit.topics import load_topics

from trec_reference import trec_eval_ndcg5

BM25 = """name = "demo-bm25"
run_type = "{run_type}"
batch_size = {batch_size}

[resources.bm25]
kind = "bm25"

[[stages]]
stage = "{query}"

[[stages]]
stage = "gold_ptkb"

[[stages]]
stage = "retrieve"
k = 100
expand_ptkb = false

[[stages]]
stage = "respond"
task = "extractive"
passages = 3
"""


def _config(folder: Path, query: str = "manual_query", batch_size: int = 12) -> Path:
    path = folder / f"{query}-{batch_size}.toml"
    run_type = "manual" if query == "manual_query" else "automatic"
    path.write_text(BM25.format(query=query, batch_size=batch_size, run_type=run_type), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def manual_run(demo_dir, demo_index, tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-manual")
    return run_pipeline(_config(out), demo_dir / "topics.json", out / "run", index=demo_index)


def test_resolved_and_raw_utterances_score_as_documented(manual_run, demo_dir, demo_index, tmp_path):
    """src/ikatkit/data/demo/README.md: BM25's nDCG@5 with resolved utterances and with raw ones, as the README
    states them (to two decimals) and as ikatkit evaluates them, against pytrec_eval on the written files."""
    assert manual_run.valid is True and len(manual_run.records) == 12
    qrels = demo_dir / "qrels.txt"
    raw = run_pipeline(_config(tmp_path, "raw_query"), demo_dir / "topics.json", tmp_path / "raw", index=demo_index)
    resolved_ref, raw_ref = trec_eval_ndcg5(manual_run.trec_file, qrels), trec_eval_ndcg5(raw.trec_file, qrels)
    assert evaluate(manual_run.trec_file, qrels).mean["nDCG@5"] == pytest.approx(resolved_ref, abs=1e-4)
    assert evaluate(raw.trec_file, qrels).mean["nDCG@5"] == pytest.approx(raw_ref, abs=1e-4)
    readme = " ".join((demo_dir / "README.md").read_text(encoding="utf-8").split())
    assert f"reach nDCG@5 {resolved_ref:.2f} and the raw utterances {raw_ref:.2f}" in readme
    assert resolved_ref > raw_ref  # rewriting matters, as on the real track
    ptkb = evaluate_ptkb(read_run(manual_run.run_file), demo_dir / "ptkb_qrels.txt")
    assert ptkb.mean["nDCG@5"] == 1.0 and len(ptkb.evaluated) == 12  # gold PTKB against the topics' provenance


def test_extractive_response_is_the_top_passage(manual_run, demo_index):
    from ikatkit.index.lookup import doc

    record = manual_run.records[0]
    assert record.used == [pid for pid, _ in record.ranking[:3]]
    assert record.response == " ".join(doc(demo_index, record.used[0]).split()[:250])
    manifest = json.loads(manual_run.manifest_file.read_text())
    assert manifest["turns"] == 12 and manifest["guarded_llm_outputs"] == {} and manifest["notes"] == {}


def test_kill_and_resume_is_byte_identical(demo_dir, demo_index, tmp_path):
    config = _config(tmp_path, batch_size=2)
    whole = run_pipeline(config, demo_dir / "topics.json", tmp_path / "whole", index=demo_index)
    with pytest.raises(IkatError, match="rerun to resume"):
        run_pipeline(config, demo_dir / "topics.json", tmp_path / "killed", index=demo_index, max_batches=2)
    resumed = run_pipeline(config, demo_dir / "topics.json", tmp_path / "killed", index=demo_index)
    assert resumed.batches_done_now == 6 - 2
    assert resumed.run_file.read_bytes() == whole.run_file.read_bytes()
    assert resumed.trec_file.read_bytes() == whole.trec_file.read_bytes()
    again = run_pipeline(config, demo_dir / "topics.json", tmp_path / "killed", index=demo_index)
    assert again.batches_done_now == 0 and not (tmp_path / "killed" / "run.lock").exists()


def test_a_resumed_runs_summary_reports_its_own_work(demo_dir, demo_index, tmp_path):
    """The summary's time per turn is this call's (its batches' stage seconds in the checkpoints), never the
    time of turns an earlier call ran."""
    config, out = _config(tmp_path, batch_size=4), tmp_path / "out"
    with pytest.raises(IkatError, match="rerun to resume"):
        run_pipeline(config, demo_dir / "topics.json", out, index=demo_index, max_batches=1)
    resumed = run_pipeline(config, demo_dir / "topics.json", out, index=demo_index)
    seconds = [sum(json.loads((out / "checkpoints" / f"batch-{i:05d}.json").read_text())["seconds"].values())
               for i in (1, 2)]
    first = resumed.summary().splitlines()[0]
    assert first == (f"run demo-bm25: 12 turns; 8 turns run now in 2 batches, {sum(seconds) / 8:.2f} s/turn; "
                     "4 turns from the checkpoints of an earlier run")
    again = run_pipeline(config, demo_dir / "topics.json", out, index=demo_index)
    assert again.summary().splitlines()[0] == ("run demo-bm25: 12 turns; nothing run now; 12 turns from the "
                                               "checkpoints of an earlier run")


@pytest.mark.parametrize("fmt", ["2023", "2024", "2025", "trec"])
def test_run_files_round_trip_and_validate(manual_run, demo_dir, demo_index, tmp_path, fmt):
    topics = load_topics(demo_dir / "topics.json")
    run = read_run(manual_run.run_file)
    path = tmp_path / f"run.{'jsonl' if fmt == '2025' else 'json' if fmt != 'trec' else 'trec'}"
    run.year = int(fmt) if fmt != "trec" else run.year
    write_run(run, path, fmt, topics=topics)
    again = read_run(path, topics=topics)
    assert again.trec_ranking() == run.trec_ranking()
    if fmt != "trec":
        assert [t.responses[0].text for t in again.turns] == [t.responses[0].text for t in run.turns]
    if fmt in ("2023", "trec"):
        report = validate_run(path, topics, ids=demo_index)
        assert report.ok and not report.errors, str(report)


def test_validator_finds_passages_the_index_lacks(manual_run, demo_dir, demo_index, tmp_path):
    run = read_run(manual_run.run_file)
    run.turns[0].responses[0].passages[0].id = "clueweb22-en0000-00-00000:99"
    path = tmp_path / "run.json"
    write_run(run, path, "2023")
    report = validate_run(path, demo_dir / "topics.json", ids=demo_index)
    unknown = [p for p in report.problems if p.code == "unknown-passage"]
    assert len(report.problems) == 1 and report.ok  # a warning: the organizers' validator warns too
    assert (unknown[0].turns, unknown[0].examples, unknown[0].count) == (
        ["demo-1_1"], ["clueweb22-en0000-00-00000:99"], 1)


def test_the_turn_shown_is_the_median_of_those_the_guards_passed(demo_dir):
    """The demo shows a typical turn, not its worst: the median nDCG@3 among the turns whose response passed."""
    records = records_for(load_topics(demo_dir / "topics.json"))
    scores = {r.qid: {"nDCG@3": v} for r, v in zip(records, [0.9, 0.0, 0.5, 0.2, 0.7, 0.5, 1.0, 0.3, 0.1, 0.6,
                                                                0.4, 0.8])}
    records[1].rejected = {"respond": "Good sources ... - Microplastics - Microplastics"}  # 0.0, left out
    records[1].notes = ["response repeats a phrase: top passage used"]
    records[6].rejected = {"respond": "### How to Get Around Japan"}  # 1.0, left out
    records[6].notes = ["response is only a heading: top passage used"]
    records[3].rejected = {"respond": "It hurts. It hurts. It hurts."}  # 0.2, cut: the model's own, kept
    records[3].notes = ["response repeats a sentence: cut before the loop"]
    shown, why = representative_turn(records, scores)
    # passed as written (the cut demo-1_4 left out too): 0.9 0.5 0.7 0.5 0.3 0.1 0.6 0.4 0.8 -> sorted 0.1 0.3 0.4
    # 0.5 0.5 ...: the lower median is the 5th, the second 0.5 in topic order (demo-1_6)
    assert shown.qid == "demo-1_6" and "median nDCG@3 (0.5000)" in why and "9 judged turns" in why
    records[3].notes = ["response repeats a sentence: top passage used"]  # a fallback now: the same 9 kept,
    assert representative_turn(records, scores)[0].qid == "demo-1_6"  # 0.1 0.3 0.4 0.5 0.5: the 5th, the 2nd 0.5
    records[0].rejected = {"respond": "x"}  # 0.9 out: 8 kept (0.1 0.3 0.4 0.5 0.5 0.6 0.7 0.8), lower median 0.5
    assert representative_turn(records, scores)[0].qid == "demo-1_3"
    records[2].rejected = records[5].rejected = {"respond": "x"}  # both 0.5 out: 0.1 0.3 0.4 0.6 0.7 0.8 -> 0.4
    assert representative_turn(records, scores)[0].qid == "demo-2_5"
    for record in records:
        record.rejected, record.notes = {"respond": "x"}, []
    shown, why = representative_turn(records, scores)
    assert shown.qid == "demo-1_3" and "all 12 judged turns" in why  # 0.5 is also the lower median of all 12


def test_the_printed_commands_rerun_on_the_output(manual_run, demo_dir, demo_index, capsys):
    """The validate/eval commands the demo prints run as printed (the bundled topics' real path) and agree with
    the library."""
    import shlex

    from ikatkit.cli import main

    text = rerun_commands(manual_run.run_file, manual_run.trec_file, demo_index, demo_dir, ptkb=True)
    commands = [shlex.split(line) for line in text.splitlines()[1:]]
    assert [c[:2] for c in commands] == [["ikatkit", "validate"], ["ikatkit", "eval"], ["ikatkit", "eval-ptkb"]]
    outputs = []
    for command in commands:
        assert main(command[1:]) == 0, command
        outputs.append(capsys.readouterr().out)
    ndcg5 = next(line for line in outputs[1].splitlines() if line.startswith("nDCG@5\tall\t"))
    assert float(ndcg5.split("\t")[2]) == pytest.approx(evaluate(manual_run.trec_file, demo_dir / "qrels.txt")
                                                         .mean["nDCG@5"], abs=1e-4)
