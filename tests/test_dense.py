"""Dense retrieval: real local Ray (2 CPUs), real faiss, the bundled MiniLM; on the 894 real iKAT 2023 passages,
then on the 202 of the embedded demo collection."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ikatkit.errors import IkatError

from job_steps import Watched

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dense_index(judged, ray_local, tmp_path_factory) -> Path:
    """The passages of the Lucene index, encoded in 3 shards (OpenVINO, the default on CPU), faiss Flat."""
    from ikatkit.index.dense import build_dense

    out = tmp_path_factory.mktemp("dense") / "minilm"
    build_dense([judged.index], out, shard_size=_shard_size(judged))
    return out


def _shard_size(judged) -> int:
    """Three shards (the last one shorter where the passages do not divide by 3)."""
    return -(-len(_passages(judged.passages)) // 3)


def _stored(path: Path) -> tuple[list[str], np.ndarray]:
    import pyarrow.parquet as pq

    ids = [i for s in sorted((path / "texts").glob("*.parquet")) for i in pq.read_table(s).column("id").to_pylist()]
    vectors = np.concatenate([np.load(s) for s in sorted((path / "embeddings").glob("*.npy"))])
    return ids, vectors


def _passages(passages_jsonl: Path) -> dict[str, str]:
    return {r["id"]: r["contents"] for r in map(json.loads, passages_jsonl.read_text(encoding="utf-8").splitlines())}


def test_manifest_and_ids_round_trip(dense_index, judged):
    manifest = json.loads((dense_index / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["kind"], manifest["model"], manifest["dimension"], manifest["faiss"]) == (
        "dense", "bundled:minilm", 384, "Flat")
    assert manifest["normalisation"].startswith("l2") and manifest["backend"] == "openvino"
    texts = _passages(judged.passages)
    assert manifest["counts"] == {"passages": len(texts), "shards": 3}
    ids, vectors = _stored(dense_index)
    assert len(ids) == len(set(ids)) == len(texts) and set(ids) == set(texts)
    assert vectors.dtype == np.float16 and vectors.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(vectors.astype(np.float32), axis=1), 1.0, atol=2e-3)
    # each stored row is the embedding of its id's text, by sentence-transformers on PyTorch
    from sentence_transformers import SentenceTransformer

    from ikatkit.models import resolve_model

    rows = list(range(0, len(ids), 45))
    model = SentenceTransformer(resolve_model("bundled:minilm"), device="cpu")
    expected = model.encode([texts[ids[r]] for r in rows], normalize_embeddings=True)
    assert np.abs(vectors[rows].astype(np.float32) - expected).max() < 2e-3


def test_flat_top_k_equals_numpy_cosine(dense_index, judged):
    from ikatkit.retrieve.dense import DenseSearcher
    from ikatkit.topics import load_topics

    searcher = DenseSearcher(dense_index)
    queries = dict(list(load_topics(judged.topics).queries("manual").items())[:40])
    hits = searcher.batch_search(queries, 10)
    ids, vectors = _stored(dense_index)
    scores = searcher.encoder.encode(list(queries.values())) @ vectors.astype(np.float32).T
    for qid, row in zip(queries, scores):
        order = np.argsort(-row, kind="stable")[:10]
        got = hits[qid]
        assert len(got) == 10
        assert np.allclose([score for _, score in got], row[order], atol=1e-5)
        same = [pid == ids[i] for (pid, _), i in zip(got, order)]
        # a swap is only allowed between scores equal to float32 precision
        assert all(s or abs(row[i] - score) < 1e-5 for s, (_, score), i in zip(same, got, order))
    assert searcher.batch_search({"empty": "  "}, 10) == {"empty": []}


def test_dense_resource_retrieves_and_reads_texts(dense_index, judged, tmp_path):
    from ikatkit.pipelines.config import Resources, build_stages, load_config
    from ikatkit.pipelines.record import records_for
    from ikatkit.topics import load_topics

    config = tmp_path / "dense.toml"
    config.write_text(f'name = "dense"\n[resources.dense]\nkind = "dense"\npath = "{dense_index}"\n'
                      '[[stages]]\nstage = "manual_query"\n[[stages]]\nstage = "retrieve"\nk = 5\n'
                      'expand_ptkb = false\n', encoding="utf-8")
    loaded = load_config(config)
    stages = build_stages(loaded, Resources(loaded, judged.index, tmp_path))
    records = records_for(load_topics(judged.topics))[:3]
    for stage in stages:
        records = stage.transform(records)
    searcher = stages[1].searcher
    for record in records:
        expected = searcher.search(record.query, 5)  # alone: its embedding may differ in the last float bit
        assert [pid for pid, _ in record.ranking] == [pid for pid, _ in expected]
        assert np.allclose([s for _, s in record.ranking], [score for _, score in expected], atol=1e-6)
    pid = records[0].ranking[0][0]
    assert searcher.texts([pid, "no-such-id"]) == {pid: _passages(judged.passages)[pid]}


def test_a_rebuilt_dense_index_is_refused_on_resume(dense_index, judged, ray_local, tmp_path):
    """Checkpoints of a run over a dense index are not resumed over the same folder rebuilt (another faiss spec):
    the refusal names the resource."""
    import shutil

    from ikatkit.index.dense import build_dense
    from ikatkit.pipelines.runner import run_pipeline
    from ikatkit.topics import load_topics

    index = tmp_path / "dense"
    shutil.copytree(dense_index, index)
    config = tmp_path / "dense.toml"
    config.write_text(f'name = "dense"\nbatch_size = 4\n[resources.dense]\nkind = "dense"\npath = "{index}"\n'
                      '[[stages]]\nstage = "manual_query"\n[[stages]]\nstage = "retrieve"\nk = 5\n'
                      'expand_ptkb = false\n', encoding="utf-8")
    topics = load_topics(judged.topics)
    topics = topics.subset([c.id for c in topics.conversations][:2])
    with pytest.raises(IkatError, match="rerun to resume"):
        run_pipeline(config, topics, tmp_path / "out", index=judged.index, max_batches=1)
    build_dense([judged.index], index, shard_size=_shard_size(judged), faiss_spec="IVF4,Flat")
    with pytest.raises(IkatError, match="holds checkpoints of another resource dense"):
        run_pipeline(config, topics, tmp_path / "out", index=judged.index)


def test_interrupted_encode_resumes_and_reindexes(dense_index, judged, ray_local, tmp_path):
    """Killed after its first shard, the job resumes with the other 3 and equals the uninterrupted encode; a new
    faiss spec re-indexes the kept embeddings without encoding."""
    from ikatkit.index.dense import build_dense
    from ikatkit.retrieve.dense import DenseSearcher

    subset = tmp_path / "100.jsonl"
    subset.write_text("".join(judged.passages.read_text(encoding="utf-8").splitlines(keepends=True)[:100]))
    out = tmp_path / "dense"
    stopped = Watched(stop_after=1)
    with pytest.raises(KeyboardInterrupt):
        build_dense([subset], out, shard_size=30, progress=stopped)
    assert len(list((out / "embeddings").glob("*.npy"))) == 1 and not (out / "manifest.json").exists()
    resumed = Watched()
    workers = build_dense([subset], out, shard_size=30, progress=resumed)["parameters"]["workers"]
    actors = "1 actor" if workers == 1 else f"{workers} actors"
    assert sorted(stopped.counts + resumed.counts) == [10, 30, 30, 30]  # one shard, then only the other three
    # what is at work is said, and the total once counted: the passages left to encode (the first shard is done)
    assert resumed.steps == ["reading the inputs", "loading bundled:minilm", "starting Ray",
                             "writing the passages' text shards", f"starting {workers} encoder {actors.split()[1]} on "
                             "Ray (each loads the model)", f"encoding on {actors}", "building the faiss index (Flat)"]
    assert resumed.total == 100 - stopped.counts[0] and resumed.lines[0].startswith(
        f"encoded: {resumed.counts[0]} of {resumed.total} passages in ")
    ids, vectors = _stored(out)
    all_ids, all_vectors = _stored(dense_index)
    row = {pid: i for i, pid in enumerate(all_ids)}
    assert ids == list(_passages(subset))
    assert np.abs(vectors.astype(np.float32) - all_vectors[[row[i] for i in ids]].astype(np.float32)).max() < 2e-3

    again = Watched()
    manifest = build_dense([subset], out, shard_size=30, faiss_spec="IVF4,Flat", progress=again)
    assert again.counts == [] and again.total == 0
    assert manifest["faiss"] == "IVF4,Flat" and manifest["counts"]["passages"] == 100
    searcher = DenseSearcher(out, nprobe=4)  # every list probed: exact
    query = {"q": "how much protein does a vegetarian marathon runner need"}
    scores = searcher.encoder.encode(list(query.values())) @ vectors.astype(np.float32).T
    assert [pid for pid, _ in searcher.batch_search(query, 5)["q"]] == [ids[i] for i in np.argsort(-scores[0])[:5]]


def test_ivfpq_trained_on_float16_shards(tmp_path):
    """IVF-PQ trained on float16 shards of clustered unit vectors (32 topics): each vector's top 10 stays within
    its topic, as exact search's does."""
    import faiss

    from ikatkit.index.dense import auto_spec, build_faiss

    assert auto_spec(894, 384) == "Flat" and auto_spec(116_838_987, 384) == "IVF32768,PQ48"  # 4 sqrt(n) -> 2^15
    rng = np.random.default_rng(0)
    topics = rng.integers(0, 32, 3000)
    vectors = rng.standard_normal((32, 384))[topics] + 0.3 * rng.standard_normal((3000, 384))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float16)
    shards = []
    for n, start in enumerate(range(0, 3000, 1250)):
        shards.append(tmp_path / f"{n:05d}.npy")
        np.save(shards[-1], vectors[start:start + 1250])
    target = tmp_path / "ivfpq.faiss"
    assert build_faiss(shards, 384, "IVF8,PQ16x4", target) == 3000
    index = faiss.read_index(str(target))
    assert index.ntotal == 3000 and index.nlist == 8 and index.is_trained
    index.nprobe = 8
    _, found = index.search(vectors[:100].astype(np.float32), 10)
    assert np.all(topics[found] == topics[:100, None])
    with pytest.raises(IkatError, match="invalid faiss spec"):
        build_faiss(shards, 384, "NotAnIndex", target)


def test_unknown_model_is_one_clear_error():
    from ikatkit.models import load_sentence_transformer as load_model

    with pytest.raises(IkatError, match="no-such-org/no-such-model.*not available offline") as err:
        load_model("no-such-org/no-such-model")
    assert "hf download no-such-org/no-such-model" in str(err.value)
    # one line, not Hugging Face's two cut mid-URL ("... offline mode at 'https://)", issue 69)
    assert "\n" not in str(err.value) and "https://" not in str(err.value)


def test_weighted_fusion_normalises_and_weights():
    from ikatkit.retrieve.fusion import weighted

    bm25 = [("a", 12.0), ("b", 8.0), ("c", 4.0)]
    dense = [("c", 0.9), ("d", 0.7), ("a", 0.5)]
    # minmax: bm25 a 1, b .5, c 0; dense c 1, d .5, a 0
    fused = weighted([bm25, dense], 10, [0.25, 0.75])
    assert [pid for pid, _ in fused] == ["c", "d", "a", "b"]
    assert [s for _, s in fused] == pytest.approx([0.75, 0.375, 0.25, 0.125])
    assert weighted([bm25, dense], 2) == [("a", 1.0), ("c", 1.0)]  # equal weights, ties by id


def test_hybrid_config_fuses_bm25_and_dense_lists(dense_index, judged, tmp_path):
    """configs/hybrid_bm25_dense.toml: two retrieve stages keep two candidate lists (keyed by retriever), and the
    weighted fusion of their min-max normalised scores is the ranking."""
    from ikatkit.pipelines.config import Resources, build_stages, load_config
    from ikatkit.pipelines.record import records_for
    from ikatkit.stages.core import query_of
    from ikatkit.retrieve.fusion import normalize
    from ikatkit.topics import load_topics

    shipped = Path(__file__).resolve().parents[1] / "configs" / "hybrid_bm25_dense.toml"
    config = tmp_path / "hybrid.toml"
    config.write_text(shipped.read_text(encoding="utf-8").replace("indexes/ikat23-minilm", str(dense_index))
                      .replace("k = 1000", "k = 20"), encoding="utf-8")
    loaded = load_config(config)
    stages = build_stages(loaded, Resources(loaded, judged.index, tmp_path))
    records = records_for(load_topics(judged.topics))[:2]
    for stage in stages[:5]:  # up to fuse; respond only reads texts
        records = stage.transform(records)
    for record in records:
        assert sorted(k.split("\t")[0] for k in record.candidates) == ["bm25", "dense"]
        assert {query_of(k) for k in record.candidates} == {record.query}
        bm25, dense = (dict(normalize(record.candidates[f"{name}\t{record.query}"], "minmax"))
                       for name in ("bm25", "dense"))
        expected = {pid: 0.5 * bm25.get(pid, 0.0) + 0.5 * dense.get(pid, 0.0) for pid in {*bm25, *dense}}
        assert [pid for pid, _ in record.ranking] == sorted(expected, key=lambda p: (-expected[p], p))
        assert all(abs(s - expected[pid]) < 1e-9 for pid, s in record.ranking)


def test_hybrid_search_command_fuses_as_the_fuse_stage(dense_index, judged, tmp_path):
    """`ikatkit search --index --dense --fusion weighted`: per turn, 0.25 x BM25 + 0.75 x dense, each min-max
    normalised (hand-computed from the two searchers' own lists), in the written TREC run."""
    from ikatkit.cli import main
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.retrieve.dense import DenseSearcher
    from ikatkit.retrieve.fusion import normalize
    from ikatkit.topics import load_topics

    out = tmp_path / "hybrid.trec"
    assert main(["search", "--index", str(judged.index), "--dense", str(dense_index), "--topics", str(judged.topics),
                 "--queries", "raw", "--fusion", "weighted", "--dense-weight", "0.75", "--k", "20",
                 "--out", str(out)]) == 0
    queries = dict(list(load_topics(judged.topics).queries("raw").items())[:5])
    lists = [Bm25Searcher(judged.index).batch_search(queries, 20), DenseSearcher(dense_index).batch_search(queries, 20)]
    rows = [line.split() for line in out.read_text().splitlines()]
    for qid in queries:
        bm25, dense = (dict(normalize(found[qid])) for found in lists)
        expected = {pid: 0.25 * bm25.get(pid, 0.0) + 0.75 * dense.get(pid, 0.0) for pid in {*bm25, *dense}}
        written = [(r[2], float(r[4])) for r in rows if r[0] == qid]
        assert [pid for pid, _ in written] == sorted(expected, key=lambda p: (-expected[p], p))[:20]
        assert [s for _, s in written] == pytest.approx([expected[pid] for pid, _ in written], abs=1e-4)


def _subset(passages_jsonl: Path, folder: Path, n: int) -> Path:
    path = folder / f"{n}.jsonl"
    path.write_text("".join(passages_jsonl.read_text(encoding="utf-8").splitlines(keepends=True)[:n]))
    return path


def test_a_log_shows_progress_within_a_shard(passages_jsonl, tmp_path):
    """Issue 60: `index dense` over 300 real passages in one shard, in a log with a line at every update
    ($IKATKIT_PROGRESS_EVERY=0): a line as each Ray call of 256 passages returns, the counts rising to 300, then the
    closing line (the shard's embeddings written once, whole)."""
    import re
    import subprocess
    import sys

    from stops import ENV

    out, log = tmp_path / "dense", tmp_path / "log.txt"
    args = ["index", "dense", str(_subset(passages_jsonl, tmp_path, 300)), "--out", str(out), "--shard-size", "1000",
            "--workers", "1"]
    with log.open("w") as stderr:
        done = subprocess.run([sys.executable, "-m", "ikatkit.cli", *args], env={**ENV, "IKATKIT_PROGRESS_EVERY": "0"},
                              stdout=subprocess.DEVNULL, stderr=stderr, timeout=600)
    lines = re.findall(r"^encoded: ([\d,]+) of 300 passages in .*$", log.read_text(), re.MULTILINE)
    counts = [int(count.replace(",", "")) for count in lines]
    assert done.returncode == 0 and len(counts) == 3 and counts[0] in (44, 256) and counts[1:] == [300, 300], lines
    assert re.search(r"^encoded: 300 of 300 passages in .* \(done\)$", log.read_text(), re.MULTILINE)
    assert [p.name for p in (out / "embeddings").iterdir()] == ["00000.npy"]
    # nothing that asks nothing of the user (issue 69): no model-loading bars, no note on an unset loss
    assert "Loading weights" not in log.read_text() and "loss_type" not in log.read_text(), log.read_text()


def test_bfloat16_is_recorded_refused_in_another_dtype_and_near_float32(passages_jsonl, ray_local, tmp_path, capsys):
    """Issue 59: `--dtype bfloat16` on the CPU (PyTorch; AMX) is in the manifest and the fingerprint: a job stopped
    after its first shard is refused in float32 (naming --dtype bfloat16) and resumed in bfloat16; its embeddings
    of 40 real passages are within cosine 0.999 of float32's. float16 on the CPU is one line, nothing written."""
    from ikatkit.cli import main
    from ikatkit.index.dense import build_dense
    from ikatkit.index.encode import DenseEncoder

    subset, out = _subset(passages_jsonl, tmp_path, 40), tmp_path / "bf16"

    with pytest.raises(KeyboardInterrupt):
        build_dense([subset], out, shard_size=20, dtype="bfloat16", progress=Watched(stop_after=1))
    with pytest.raises(IkatError, match="started with --dtype bfloat16, not auto — fix: run it again with --dtype "
                                        "bfloat16"):
        build_dense([subset], out, shard_size=20)
    manifest = build_dense([subset], out, shard_size=20, dtype="bfloat16")
    assert manifest["placement"] == {"device": "cpu", "dtype": "bfloat16", "tolerance": 5e-2, "batch_size": 32}
    assert manifest["backend"] == "torch" and manifest["counts"] == {"passages": 40, "shards": 2}
    ids, vectors = _stored(out)
    texts = _passages(subset)
    assert ids == list(texts)
    expected = DenseEncoder("bundled:minilm").encode(list(texts.values()))  # float32, sentence-transformers' encode
    found = vectors.astype(np.float32)
    cosine = (found * expected).sum(1) / np.linalg.norm(found, axis=1) / np.linalg.norm(expected, axis=1)
    assert 0.999 <= cosine.min() and cosine.min() < 1 - 1e-7  # near, and not float32's own bits
    capsys.readouterr()
    assert main(["index", "dense", str(subset), "--out", str(tmp_path / "f16"), "--dtype", "float16"]) == 2
    said = capsys.readouterr().err  # after the model's loading bar
    assert said.splitlines()[-1] == ("ikatkit: error: dtype: float16 is not computed on the CPU — fix: use bfloat16 or "
                                     "float32 (the default) on a CPU") and "Traceback" not in said
    assert not (tmp_path / "f16").exists()


def test_a_job_begun_before_the_dtype_was_recorded_is_refused_without_naming_a_dtype(tmp_path):
    """A work.json written before its kind recorded a dtype (sparse indexes before `--dtype`) differs in the dtype:
    refused as other settings, not as "started with --dtype None"."""
    from ikatkit.index.job import claim_work

    claim_work(tmp_path, {"model": "m", "batch_size": 8}, "sparse index")
    with pytest.raises(IkatError) as refused:
        claim_work(tmp_path, {"model": "m", "batch_size": 8, "dtype": "auto"}, "sparse index",
                   {"batch_size": "--batch-size", "dtype": "--dtype"})
    assert refused.value.message == ("an unfinished sparse index here was started from other inputs or settings "
                                     "(dtype)")
