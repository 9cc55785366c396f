"""Pipelines end to end on real data: the 894 real passages, the 2023 test topics, bundled models."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ikatkit.errors import IkatError
from ikatkit.pipelines import load_config, run_pipeline
from ikatkit.topics import load_topics

MANUAL_BIENCODER = (Path(__file__).resolve().parents[1] / "configs" / "manual_biencoder.toml").read_text()

LLM = """
[resources.llm]
kind = "llm"
backend = "transformers"
model = "bundled:smollm2"
max_new_tokens = 24

[resources.minilm]
kind = "bi-encoder"
model = "bundled:minilm"

[resources.bm25]
kind = "bm25"
"""

RTG = LLM + """
[[stages]]
stage = "rewrite"

[[stages]]
stage = "rank_ptkb"
ranker = "minilm"
k = 3

[[stages]]
stage = "retrieve"
k = 100

[[stages]]
stage = "rerank"
ranker = "minilm"

[[stages]]
stage = "respond"
passages = 3
"""

GTR = LLM + """
[[stages]]
stage = "generate_answer"

[[stages]]
stage = "generate_queries"
n = 5

[[stages]]
stage = "retrieve"
k = 200
expand_ptkb = false

[[stages]]
stage = "rerank"
ranker = "minilm"

[[stages]]
stage = "fuse"
method = "interleave"
k = 1000

[[stages]]
stage = "classify_ptkb"

[[stages]]
stage = "respond"
task = "gtr_response"
passages = 3
"""


def _config(tmp_path: Path, name: str, body: str, run_type: str = "automatic", batch_size: int = 4) -> Path:
    path = tmp_path / f"{name}.toml"
    if re.search(r"^name = ", body, re.M):
        path.write_text(body)
    else:
        path.write_text(f'name = "{name}"\nrun_type = "{run_type}"\nbatch_size = {batch_size}\n' + body)
    return path


@pytest.fixture(scope="module")
def manual_run(ikat2023, passages_index, tmp_path_factory):
    out = tmp_path_factory.mktemp("manual")
    config = _config(out, "manual-biencoder", MANUAL_BIENCODER)
    return run_pipeline(config, ikat2023 / "test_topics.json", out / "run", index=passages_index,
                        cache_dir=out / "cache")


def test_manual_run_is_valid_and_scored(manual_run, ikat2023):
    import ir_measures

    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.runs.io import read_run

    assert manual_run.valid is True
    run = read_run(manual_run.run_file)
    assert run.run_type == "manual" and len(run.turns) == 332
    first = run.turn("9-1_1").responses[0]
    assert sum(p.used for p in first.passages) == 3
    assert [p.key for p in first.ptkb] == ["5", "4", "2"]  # the topics' gold PTKB provenance
    scores = [p.score for p in first.passages]
    assert scores == sorted(scores, reverse=True)
    result = evaluate(manual_run.trec_file, load_qrels(ikat2023 / "qrels.txt"))
    manifest = json.loads(manual_run.manifest_file.read_text())
    assert manifest["turns"] == 332 and manifest["valid"] is True
    # The reference: ir-measures itself on the written TREC file and the year's qrels, over the judged turns.
    qrels = list(ir_measures.read_trec_qrels(str(ikat2023 / "qrels.txt")))
    trec = list(ir_measures.read_trec_run(str(manual_run.trec_file)))
    assert set(result.evaluated) == {q.query_id for q in qrels} & {r.query_id for r in trec}
    direct = ir_measures.calc_aggregate([ir_measures.nDCG @ 5], qrels, trec)[ir_measures.nDCG @ 5]
    assert result.mean["nDCG@5"] == pytest.approx(direct, abs=1e-12) and direct > 0


def test_manual_run_on_the_demo_is_scored_as_ir_measures_scores_it(demo_dir, demo_index, tmp_path):
    """The manual bi-encoder config on the embedded demo: every turn answered with its gold PTKB, the scores those
    of ir-measures on the written TREC file and the demo's own qrels."""
    import ir_measures

    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.runs.io import read_run

    outcome = run_pipeline(_config(tmp_path, "manual-biencoder", MANUAL_BIENCODER), demo_dir / "topics.json",
                           tmp_path / "run", index=demo_index, cache_dir=tmp_path / "cache")
    raw = json.loads((demo_dir / "topics.json").read_text())
    gold = {f"{c['number']}_{t['turn_id']}": t["ptkb_provenance"] for c in raw for t in c["turns"]}
    run = read_run(outcome.run_file)
    assert outcome.valid is True and run.run_type == "manual" and [t.turn_id for t in run.turns] == list(gold)
    for turn in run.turns:
        response = turn.responses[0]
        assert [p.key for p in response.ptkb] == [str(k) for k in gold[turn.turn_id]][:3]
        assert sum(p.used for p in response.passages) == 3
    qrels_file = demo_dir / "qrels.txt"
    result = evaluate(outcome.trec_file, load_qrels(qrels_file))
    judged_turns = {line.split()[0] for line in qrels_file.read_text().splitlines()}
    assert set(result.evaluated) == judged_turns & set(gold)
    trec = list(ir_measures.read_trec_run(str(outcome.trec_file)))
    direct = ir_measures.calc_aggregate([ir_measures.nDCG @ 5], list(ir_measures.read_trec_qrels(str(qrels_file))),
                                        trec)
    assert result.mean["nDCG@5"] == pytest.approx(direct[ir_measures.nDCG @ 5], abs=1e-12) and direct[
        ir_measures.nDCG @ 5] > 0


def test_kill_and_resume_is_byte_identical(ikat2023, passages_index, tmp_path):
    topics = load_topics(ikat2023 / "test_topics.json").subset(["9-1", "9-2", "10-1"])
    config = _config(tmp_path, "manual-biencoder", MANUAL_BIENCODER.replace("batch_size = 16", "batch_size = 8"))
    whole = run_pipeline(config, topics, tmp_path / "whole", index=passages_index)
    with pytest.raises(IkatError, match="rerun to resume"):
        run_pipeline(config, topics, tmp_path / "killed", index=passages_index, max_batches=2)
    resumed = run_pipeline(config, topics, tmp_path / "killed", index=passages_index)
    batches = -(-len(topics) // 8)
    assert resumed.batches_done_now == batches - 2
    assert resumed.run_file.read_bytes() == whole.run_file.read_bytes()
    assert resumed.trec_file.read_bytes() == whole.trec_file.read_bytes()
    again = run_pipeline(config, topics, tmp_path / "killed", index=passages_index)
    assert again.batches_done_now == 0  # a finished run redoes nothing
    other = _config(tmp_path, "manual-biencoder", MANUAL_BIENCODER.replace("k = 100", "k = 50"))
    with pytest.raises(IkatError, match="checkpoints of another config"):
        run_pipeline(other, topics, tmp_path / "killed", index=passages_index)


@pytest.mark.parametrize("name, body", [("rtg-smollm2", RTG), ("gtr-smollm2", GTR)])
def test_llm_pipelines_on_one_conversation(name, body, judged, tmp_path):
    topics = load_topics(judged.topics).subset(list(judged.conversations[:1]))
    outcome = run_pipeline(_config(tmp_path, name, body), topics, tmp_path / "run", index=judged.index,
                           cache_dir=tmp_path / "cache")
    assert outcome.valid is True
    assert len(outcome.records) == len(topics)
    for record in outcome.records:
        assert record.response.strip()
        assert record.ranking and len(record.ranking) <= (1000 if name.startswith("gtr") else 100)
        if name.startswith("gtr"):
            assert 1 <= len(record.queries) <= 5
            assert record.initial_answer or "generate_answer" in record.rejected  # a guarded answer is kept there
        else:
            assert record.query and len(record.ptkb) == 3
    manifest = json.loads(outcome.manifest_file.read_text())
    assert set(manifest["seconds_per_stage"]) >= {"retrieve", "rerank", "respond"}
    assert manifest["resource_stats"]["llm"]["misses"] > 0


def test_config_errors_name_the_place(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[stages]]\nstage = "rewrit"\n')
    with pytest.raises(IkatError) as err:
        load_config(bad)
    assert (err.value.path, err.value.where) == (bad, "stages[0]") and "'rewrit'" in err.value.message
    assert "'rewrite'" in err.value.fix
    bad.write_text('name = "x"\n[[stages]]\nstage = "rerank"\nranker = "nope"\n')
    with pytest.raises(IkatError) as err:
        load_config(bad)
    assert "'nope' is not a declared resource" in err.value.message and err.value.fix == "declare [resources.nope]"


def test_shipped_configs_parse():
    paths = sorted(Path(__file__).resolve().parents[1].glob("configs/*.toml"))
    assert len(paths) >= 10 and "demo.toml" in {p.name for p in paths}  # a glob that finds nothing fails
    for path in paths:
        config = load_config(path)
        assert config.stages and config.name
