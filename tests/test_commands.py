"""The commands users reach for, on the embedded demo collection (no ../shared needed except where marked):
index build of provenance passages, search and run with own rewrites, PTKB qrels from topics, rerank, ptkb,
demo; and the messages of bad input."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ikatkit.cli import main
from ikatkit.collection.readers import ReadStats, read_passages
from ikatkit.errors import IkatError
from ikatkit.evaluate.qrels import load_qrels
from ikatkit.topics import load_topics

from trec_reference import trec_eval_ndcg5

EXTRACTIVE = """name = "demo-extractive"
run_type = "automatic"
batch_size = 5

[resources.bm25]
kind = "bm25"

[[stages]]
stage = "raw_query"

[[stages]]
stage = "retrieve"
k = 100
expand_ptkb = false

[[stages]]
stage = "respond"
task = "extractive"
"""


@pytest.fixture(scope="module")
def topics_file(demo_dir) -> Path:
    return demo_dir / "topics.json"


@pytest.fixture(scope="module")
def rewrites(topics_file, tmp_path_factory) -> Path:
    """The demo topics' resolved utterances as a query file, as teams distribute rewrites."""
    path = tmp_path_factory.mktemp("queries") / "rewrites.tsv"
    queries = load_topics(topics_file).queries("manual")
    path.write_text("".join(f"{qid}\t{text}\n" for qid, text in queries.items()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "extractive.toml"
    path.write_text(EXTRACTIVE, encoding="utf-8")
    return path


def _trec(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def test_index_build_reads_provenance_passages(demo_dir, tmp_path, capsys):
    """The organizers' {doc_id, passage_id, passage_text} JSONL is detected and indexed as doc_id:passage_id."""
    passages = list(read_passages(demo_dir / "clueweb22" / "en0000-00.json", "clueweb22", ReadStats()))
    lines = [json.dumps({"doc_id": p.id.split(":")[0], "passage_id": p.id.split(":")[1], "passage_text": p.contents})
             for p in passages]
    lines[3] = "{not json"
    lines[7] = json.dumps({"doc_id": "clueweb22-en0000-00-00001", "passage_text": "no passage id"})
    source = tmp_path / "provenance.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = tmp_path / "index"
    assert main(["index", "build", str(source), "--out", str(index), "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert f"{source}:4: invalid JSON" in err and f"{source}:8: a provenance passage needs" in err
    manifest = json.loads((index / "manifest.json").read_text())
    kept = [p for i, p in enumerate(passages) if i not in (3, 7)]
    documents = len({p.id.split(":")[0] for p in kept})
    assert documents < len(kept)  # passages of one document count it once
    assert manifest["counts"] == {"documents": documents, "passages": len(kept), "skipped": 2}
    assert main(["index", "get", str(index), passages[0].id]) == 0
    assert capsys.readouterr().out.strip() == passages[0].contents.strip()


def test_search_with_a_query_file_equals_manual_queries(demo_index, topics_file, rewrites, tmp_path):
    """In a fresh process (so Lucene's first-use INFO line would show): the same run, and no JVM chatter."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    command = [sys.executable, "-m", "ikatkit.cli", "search", "--index", str(demo_index), "--k", "50"]
    own = subprocess.run([*command, "--queries", str(rewrites), "--out", str(tmp_path / "own.trec")], env=env,
                         capture_output=True, text=True)
    assert own.returncode == 0, own.stderr
    assert "MemorySegmentIndexInput" not in own.stderr and "INFO" not in own.stderr
    assert main(["search", "--index", str(demo_index), "--topics", str(topics_file), "--queries", "manual", "--k", "50",
                 "--run-type", "automatic", "--out", str(tmp_path / "manual.trec")]) == 0
    assert (tmp_path / "own.trec").read_bytes() == (tmp_path / "manual.trec").read_bytes()
    assert len({row[0] for row in _trec(tmp_path / "own.trec")}) == 12


def test_search_errors(demo_index, tmp_path, capsys):
    assert main(["search", "--index", str(demo_index), "--queries", "raw", "--out", str(tmp_path / "x")]) == 2
    assert "--queries raw reads the utterances of a topic file — fix: pass --topics FILE" in capsys.readouterr().err
    bad = tmp_path / "bad.tsv"
    bad.write_text("demo-1_1\tprotein\ndemo-1_2 no tab here\n")
    assert main(["search", "--index", str(demo_index), "--queries", str(bad), "--out", str(tmp_path / "x")]) == 2
    assert f"{bad} (line 2): expected 'qid<TAB>text', got 'demo-1_2 no tab here'" in capsys.readouterr().err


def test_run_with_a_query_file(demo_index, topics_file, rewrites, config, tmp_path, capsys):
    """--queries replaces the config's query stage: the same ranking as the resolved utterances give."""
    manual = tmp_path / "manual.toml"
    manual.write_text(config.read_text().replace('stage = "raw_query"', 'stage = "manual_query"'))
    common = ["--topics", str(topics_file), "--index", str(demo_index)]
    assert main(["run", str(config), *common, "--queries", str(rewrites), "--out", str(tmp_path / "own")]) == 0
    assert "validation:   valid" in capsys.readouterr().out
    assert main(["run", str(manual), *common, "--out", str(tmp_path / "manual")]) == 0
    own, resolved = tmp_path / "own" / "demo-extractive.trec", tmp_path / "manual" / "demo-extractive.trec"
    assert own.read_bytes() == resolved.read_bytes() and len({row[0] for row in _trec(own)}) == 12
    manifest = json.loads((tmp_path / "own" / "manifest.json").read_text())
    assert manifest["config"]["stages"][0] == {"stage": "file_query", "path": str(rewrites),
                                               "sha256": hashlib.sha256(rewrites.read_bytes()).hexdigest()}
    partial = tmp_path / "partial.tsv"
    partial.write_text("".join(rewrites.read_text().splitlines(keepends=True)[:5]))
    assert main(["run", str(config), *common, "--queries", str(partial), "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert f"{partial}: no query for 7 of the 12 turns, e.g. ['demo-1_6', 'demo-2_1', 'demo-2_2']" in err
    assert not (tmp_path / "p" / "checkpoints").exists()


def test_run_help_names_every_resource_kind_and_where_the_stages_are_listed(capsys):
    """run --help names each resource kind and points to `ikatkit stages` (it no longer lists the stages, so a
    source tree without ikatkit's entry points can build the CLI: tests/test_source_tree.py)."""
    from ikatkit.pipelines.resources import KINDS

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "configs/demo.toml" in text and "`ikatkit stages` lists the stages" in text
    assert f"kind = {' | '.join(KINDS)}" in text
    assert main(["stages"]) == 0
    listed = capsys.readouterr().out
    assert all(f"\n{stage}: " in "\n" + listed for stage in ("file_query", "rewrite", "rank_ptkb"))
    for command, expected in (("demo", "only exercises the plumbing"), ("eval", "json: {mean, evaluated, missing")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert expected in " ".join(capsys.readouterr().out.split())


def test_ptkb_qrels_from_topics(topics_file, demo_dir, tmp_path, capsys):
    out = tmp_path / "ptkb_qrels.txt"
    assert main(["topics", str(topics_file), "--ptkb-qrels", str(out)]) == 0
    assert "wrote 108 PTKB judgements for 12 turns" in capsys.readouterr().out
    assert load_qrels(out) == load_qrels(demo_dir / "ptkb_qrels.txt")


def test_ptkb_qrels_equal_the_organizers_file(ikat2023, tmp_path):
    """The 2023 organizers' PTKB qrels are exactly the topics' ptkb_provenance, line for line."""
    out = tmp_path / "ptkb_qrels.txt"
    assert main(["topics", str(ikat2023 / "test_topics.json"), "--ptkb-qrels", str(out)]) == 0
    assert out.read_text() == (ikat2023 / "ptkb_qrels.organizers.txt").read_text()


def test_ptkb_command_ranks_by_cosine_similarity(topics_file, demo_dir, tmp_path, capsys):
    """The order equals sentence-transformers' own cosine similarities of MiniLM embeddings."""
    from sentence_transformers import SentenceTransformer, util

    from ikatkit.models import resolve_model

    out = tmp_path / "ptkb.trec"
    assert main(["ptkb", str(topics_file), "--classifier", "none", "--queries", "raw", "--qrels",
                 str(demo_dir / "ptkb_qrels.txt"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "over 12 judged turns" in printed and "nDCG@5" in printed
    rows = [r for r in _trec(out) if r[0] == "demo-1_4"]
    model = SentenceTransformer(resolve_model("bundled:minilm"), device="cpu")
    topics = load_topics(topics_file)
    ptkb = topics.conversation("demo-1").ptkb
    scores = util.cos_sim(model.encode(topics.turn("demo-1_4").utterance), model.encode(list(ptkb.values())))[0]
    expected = [key for _, key in sorted(zip((-s for s in scores.tolist()), ptkb))]
    assert [r[2] for r in rows] == expected
    assert float(rows[0][4]) == pytest.approx(max(scores.tolist()), abs=1e-5)


def test_ptkb_command_refuses_a_ranker_the_classifier_would_ignore(demo_dir, tmp_path, capsys):
    """--kind/--model rank only with --classifier none: with the default classifier they were silently ignored."""
    topics = str(demo_dir / "topics.json")
    for extra in (["--kind", "cross-encoder"], ["--model", "sentence-transformers/all-MiniLM-L12-v2"]):
        assert main(["ptkb", topics, "--out", str(tmp_path / "p.trec"), *extra]) == 2
        error = capsys.readouterr().err
        assert "--kind/--model choose the ranker of --classifier none" in error and "Traceback" not in error
    assert not (tmp_path / "p.trec").exists()


def test_rerank_command(demo_index, topics_file, tmp_path, capsys):
    """Re-ranking a BM25 run: each turn's top 5 ordered by the bi-encoder's scores against its query."""
    from ikatkit.rank import make_ranker
    from ikatkit.retrieve.bm25 import Bm25Searcher

    bm25 = tmp_path / "bm25.trec"
    assert main(["search", "--index", str(demo_index), "--topics", str(topics_file), "--queries", "raw",
                 "--out", str(bm25)]) == 0
    out = tmp_path / "reranked.trec"
    assert main(["rerank", str(bm25), "--index", str(demo_index), "--topics", str(topics_file), "--queries", "raw",
                 "--kind", "bi-encoder", "--depth", "5", "--out", str(out)]) == 0
    rows, hits = _trec(out), _trec(bm25)
    assert len(rows) == 12 * 5 and {r[5] for r in rows} == {"bm25-rerank"}
    turn = [r for r in rows if r[0] == "demo-2_3"]
    top5 = [r[2] for r in hits if r[0] == "demo-2_3"][:5]
    assert sorted(r[2] for r in turn) == sorted(top5)
    texts = Bm25Searcher(demo_index).texts(top5)
    ranked = make_ranker("bi-encoder", "bundled:minilm").rank("Is the pass worth it?", texts)
    assert [r[2] for r in turn] == [pid for pid, _ in ranked]


def test_bad_input_messages(topics_file, tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text("\n")
    assert main(["topics", str(empty)]) == 2
    assert f"{empty}: topic file is empty" in capsys.readouterr().err
    shape = tmp_path / "shape.json"
    shape.write_text('{"not": "a list"}')
    assert main(["topics", str(shape)]) == 2
    assert f"{shape}: topics must be a non-empty JSON list" in capsys.readouterr().err
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(json.dumps([{"number": "9-1", "turns": ["x" * 1000]}]))
    with pytest.raises(IkatError) as err:
        load_qrels(qrels)
    assert len(str(err.value)) < 400 and f"... ({len(qrels.read_text())} characters)" in str(err.value)
    run = tmp_path / "run.json"
    run.write_text('{"foo": 1}')
    assert main(["validate", str(run), "--topics", str(topics_file)]) == 1
    assert capsys.readouterr().out.count("fix:") == 1


def test_demo_command_shows_one_turn_end_to_end(config, demo_dir, tmp_path, capsys):
    """`ikatkit demo` with a retrieval-only config: index, run, evaluation, then a typical turn from utterance to
    response (the median nDCG@3; no response is guarded here), and the commands that check the output again."""
    assert main(["demo", "--config", str(config), "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "index " in out and "202 passages from 60 documents" in out and "validation:   valid" in out
    evaluation = json.loads((tmp_path / "demo" / "evaluation.json").read_text())
    turns = [t for t in load_topics(demo_dir / "topics.json") if t.qid in evaluation["per_query"]]
    median = sorted(turns, key=lambda t: evaluation["per_query"][t.qid]["nDCG@3"])[(len(turns) - 1) // 2]
    assert f"chosen as typical: {median.qid} has the median nDCG@3" in out
    shown = out[out.index(f"\n{median.qid}:\n"):]
    assert f"utterance:   {median.utterance}" in shown
    top = shown.split("top passage: ")[1].split()[0]
    response = shown.split("response:    ")[1].split("\n")[0]
    assert top.startswith("clueweb22-en0000-00-") and response.split()[:5]
    assert f"nDCG@3 {evaluation['per_query'][median.qid]['nDCG@3']:.4f}" in shown
    assert f"--topics {demo_dir / 'topics.json'}" in out and f"--qrels {demo_dir / 'qrels.txt'}" in out
    assert "only exercises the plumbing" not in out  # no LLM in this config
    run_file = next((tmp_path / "demo" / "run").glob("*.trec"))
    assert evaluation["passages"]["nDCG@5"] == pytest.approx(trec_eval_ndcg5(run_file, demo_dir / "qrels.txt"),
                                                             abs=1e-4)  # pytrec_eval on the written files
