"""Learned sparse retrieval: random-weight SPLADE models of the real shape (BERT-base masked LM, 30,522 terms; no
SPLADE weights reach these machines), real local Ray, real Anserini impact indexes of the real iKAT 2023 passages,
real Lucene search checked against a brute-force dot product over the stored quantized vectors.

On 2 shared CPU cores BERT-base encodes about one passage a second, so the full-depth model indexes 8 of the 894
passages; the searches run on 40 of them encoded by the same model cut to 2 layers (same width, vocabulary and MLM
head: the head's LayerNorm keeps the weights of the same scale)."""

from __future__ import annotations

import gzip
import json
import signal
import sys
from pathlib import Path

import pytest

from ikatkit.errors import IkatError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from splade_random import random_splade  # noqa: E402

from job_steps import Watched  # noqa: E402

pytestmark = pytest.mark.slow
PASSAGES, SHARD = 40, 5  # 8 shards: a stop after the first lands while most are still to encode


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("splade-models")


@pytest.fixture(scope="module")
def shallow(models) -> Path:
    return random_splade(models / "bert-base-2-layers", layers=2)


@pytest.fixture(scope="module")
def subset(passages_jsonl, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("splade-passages") / f"{PASSAGES}.jsonl"
    path.write_text("".join(passages_jsonl.read_text(encoding="utf-8").splitlines(keepends=True)[:PASSAGES]))
    return path


@pytest.fixture(scope="module")
def sparse_index(subset, shallow, ray_local, tmp_path_factory) -> Path:
    from ikatkit.index.sparse import build_sparse

    out = tmp_path_factory.mktemp("sparse") / "splade"
    build_sparse([subset], out, model=str(shallow), shard_size=SHARD)
    return out


def _vectors(index: Path) -> dict[str, dict[str, int]]:
    """The stored quantized vectors, in shard order."""
    return {r["id"]: r["vector"] for shard in sorted((index / "vectors").glob("*.jsonl.gz"))
            for r in map(json.loads, gzip.open(shard, "rt", encoding="utf-8"))}


def _brute_force(query: dict[str, int], vectors: dict[str, dict[str, int]]) -> list[tuple[str, float]]:
    """Every passage sharing a term with the query by the integer dot product, ties by id."""
    scored = [(pid, sum(weight * vector.get(term, 0) for term, weight in query.items()))
              for pid, vector in vectors.items()]
    return sorted(((pid, float(s)) for pid, s in scored if s > 0), key=lambda hit: (-hit[1], hit[0]))


def _queries(ikat2023: Path, n: int) -> dict[str, str]:
    from ikatkit.topics import load_topics

    return dict(list(load_topics(ikat2023 / "test_topics.json").queries("manual").items())[:n])


def test_real_shape_model_indexes_real_passages(passages_jsonl, models, ray_local, tmp_path, capsys):
    """BERT-base (12 layers, 768 wide, 30,522 terms) with the bundled WordPiece tokenizer: `index sparse` indexes
    real passages, `index stats` shows the manifest, and a search's scores are the dot products of the vectors."""
    from transformers import AutoConfig, AutoTokenizer

    from ikatkit.cli import main
    from ikatkit.retrieve.sparse import SparseSearcher

    model = random_splade(models / "bert-base")
    config, tokenizer = AutoConfig.from_pretrained(model), AutoTokenizer.from_pretrained(model)
    assert (config.vocab_size, len(tokenizer), config.num_hidden_layers, config.hidden_size) == (30522, 30522, 12, 768)
    eight = tmp_path / "8.jsonl"
    eight.write_text("".join(passages_jsonl.read_text(encoding="utf-8").splitlines(keepends=True)[:8]))
    out = tmp_path / "splade"
    assert main(["index", "sparse", str(eight), "--out", str(out), "--model", str(model), "--shard-size", "4"]) == 0
    assert main(["index", "stats", str(out)]) == 0
    stats = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert (stats["kind"], stats["counts"], stats["lucene"]["documents"]) == ("sparse", {"passages": 8, "shards": 2}, 8)
    assert stats["quantization"].startswith("round(weight * 100)")
    vectors = _vectors(out)
    sizes = sorted(map(len, vectors.values()))  # SPLADE-like sparsity (BIAS of bench/splade_random.py)
    assert 20 < sizes[0] and sizes[-1] < 1000 and 100 < sizes[len(sizes) // 2] < 600, sizes
    searcher = SparseSearcher(out)
    query = searcher.encoder.encode_queries(["how much protein does a vegetarian marathon runner need"])[0]
    assert 5 < len(query) < 100
    assert searcher.search_vectors({"q": query}, 1000)["q"] == _brute_force(query, vectors)


def test_manifest_and_stored_vectors(sparse_index, subset, shallow, tmp_path):
    import hashlib

    from ikatkit.index.sparse_encoder import SparseEncoder
    from ikatkit.index.texts import LuceneTexts
    from ikatkit.index.verify import verify

    manifest = json.loads((sparse_index / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["kind"], manifest["model"], manifest["scale"]) == ("sparse", str(shallow), 100)
    assert manifest["counts"] == {"passages": PASSAGES, "shards": PASSAGES // SHARD}
    texts = {r["id"]: r["contents"] for r in map(json.loads, subset.read_text(encoding="utf-8").splitlines())}
    vectors = _vectors(sparse_index)
    assert list(vectors) == list(texts)
    assert LuceneTexts(sparse_index).texts(list(texts)[:5]) == {pid: texts[pid] for pid in list(texts)[:5]}
    hashes = tmp_path / "hashes.tsv"  # `index verify` as for a BM25 index: the organizers' layout, sorted
    keys = sorted((pid.rpartition(":")[0], int(pid.rpartition(":")[2]), pid) for pid in texts)
    hashes.write_text("".join(f"{doc}\t{n}\t{hashlib.md5(texts[pid].encode()).hexdigest()}\n" for doc, n, pid in keys))
    report = verify(sparse_index, hashes)
    assert report.ok and report.matched == PASSAGES
    # each stored vector is its text's encoding, quantized (a weight may differ by 1 where a float of another
    # batch's padding rounded the other way)
    encoder = SparseEncoder(str(shallow))
    for pid, expected in zip(list(texts)[:4], encoder.encode([texts[p] for p in list(texts)[:4]])):
        stored = vectors[pid]
        assert all(isinstance(w, int) and w > 0 for w in stored.values())
        assert max(abs(stored.get(t, 0) - expected.get(t, 0)) for t in {*stored, *expected}) <= 1


def test_retrieve_scores_equal_the_hand_computation(sparse_index, ikat2023, tmp_path):
    """The `retrieve` stage of a config with a splade resource: every score is the sum over shared terms of query
    weight x stored passage weight, every passage sharing a term is returned, ties by id."""
    from ikatkit.pipelines.config import Resources, build_stages, load_config
    from ikatkit.pipelines.record import records_for
    from ikatkit.topics import load_topics

    config = tmp_path / "splade.toml"
    config.write_text(f'name = "splade"\n[resources.splade]\nkind = "splade"\npath = "{sparse_index}"\n'
                      '[[stages]]\nstage = "manual_query"\n[[stages]]\nstage = "retrieve"\nk = 1000\n'
                      'expand_ptkb = false\n', encoding="utf-8")
    loaded = load_config(config)
    stages = build_stages(loaded, Resources(loaded, None, tmp_path))
    records = records_for(load_topics(ikat2023 / "test_topics.json"))[:3]
    for stage in stages:
        records = stage.transform(records)
    searcher, vectors = stages[1].searcher, _vectors(sparse_index)
    for record in records:
        query = searcher.encoder.encode_queries([record.query])[0]
        hand = {pid: sum(weight * vectors[pid].get(term, 0) for term, weight in query.items()) for pid in vectors}
        assert record.ranking and all(score == hand[pid] for pid, score in record.ranking)
        assert {pid for pid, _ in record.ranking} == {pid for pid, s in hand.items() if s > 0}
        assert record.ranking == sorted(record.ranking, key=lambda hit: (-hit[1], hit[0]))


def test_top_1000_equal_brute_force_and_anserini_on_20_queries(sparse_index, ikat2023):
    """20 queries: the batch (TopHits on 2 threads), each query alone in parts (ParallelSearch) and Anserini's own
    SimpleImpactSearcher all return the brute-force ranking of the stored vectors."""
    from ikatkit.java import autoclass
    from ikatkit.retrieve.sparse import SparseSearcher

    searcher = SparseSearcher(sparse_index)
    parts = SparseSearcher(sparse_index, parallel_from=0)
    anserini = autoclass("io.anserini.search.SimpleImpactSearcher")(str(sparse_index))
    integer, hashmap = autoclass("java.lang.Integer"), autoclass("java.util.HashMap")
    queries = _queries(ikat2023, 20)
    vectors = _vectors(sparse_index)
    encoded = dict(zip(queries, searcher.encoder.encode_queries(list(queries.values()))))
    found = searcher.search_vectors(encoded, 1000)
    for qid, query in encoded.items():
        expected = _brute_force(query, vectors)
        assert found[qid] == expected and parts.search_vectors({qid: query}, 1000)[qid] == expected
        weights = hashmap()
        for term, weight in query.items():
            weights.put(term, integer(weight))
        assert [(h.docid, float(h.score)) for h in anserini.search(weights, 1000)] == expected
    assert searcher.batch_search({"empty": " "}, 10) == {"empty": []}


def _lucene_summary(index: Path) -> dict:
    """Field options, postings and term-frequency totals, and every document's stored fields, by id."""
    from ikatkit.index.lucene import open_reader, postings_summary

    reader = open_reader(index)
    stored = reader.storedFields()
    documents = {stored.document(i).get("id"): stored.document(i).get("raw") for i in range(reader.maxDoc())}
    reader.close()
    return {**postings_summary(index), "stored": documents}


def test_impact_indexer_builds_anserinis_index(sparse_index, ikat2023, tmp_path):
    """`index sparse` builds with ImpactIndexer.java (each term once, its weight the frequency); Anserini's
    IndexCollection over the same vector shards gives the same fields, postings, frequencies, stored documents and
    top 1,000 of 20 queries; ImpactIndexer refuses a command line it does not build."""
    from ikatkit.index.anserini import IMPACT_INDEXER, IMPACT_OPTIONS, Anserini, impact_builder
    from ikatkit.retrieve.sparse import SparseSearcher

    assert json.loads((sparse_index / "manifest.json").read_text())["parameters"]["indexer"] == IMPACT_INDEXER
    anserini = tmp_path / "anserini"
    with Anserini(sparse_index / "vectors", anserini, 2, "1g", collection="JsonVectorCollection",
                  options=IMPACT_OPTIONS) as run:
        run.wait(PASSAGES)
    ours, theirs = _lucene_summary(sparse_index), _lucene_summary(anserini)
    assert ours["frequencies"] > 10 * ours["postings"] > 0  # weights, not ones, are the frequencies
    assert ours == theirs
    queries = SparseSearcher(sparse_index).encoder.encode_queries(list(_queries(ikat2023, 20).values()))
    vectors = dict(enumerate(queries))
    model = json.loads((sparse_index / "manifest.json").read_text())["model"]
    assert SparseSearcher(sparse_index).search_vectors(vectors, 1000) == \
        SparseSearcher(anserini, model=model).search_vectors(vectors, 1000)
    helpers, main = impact_builder("terms")
    with Anserini(sparse_index / "vectors", tmp_path / "refused", 1, "1g", helpers=helpers,
                  main=main) as run:  # JsonCollection with positions: not an impact index
        with pytest.raises(IkatError, match="ImpactIndexer takes"):
            run.wait(PASSAGES)


def test_impact_indexer_names_the_line_of_a_bad_record(tmp_path):
    """A vector shard whose line 3 is not JSON, lacks "vector", or has a weight that is not a positive integer: the
    build stops with one IkatError naming the shard, line 3 and what is wrong; nothing is committed."""
    from ikatkit.index.anserini import IMPACT_OPTIONS, Anserini, impact_builder

    helpers, main = impact_builder("terms")
    good = [json.dumps({"id": f"d:{n}", "contents": "", "vector": {"a": 3, "b": 1}}) for n in range(3)]
    bad = {'{"id": "d:2", "vector": {"a": 3}': "not JSON",
           '{"id": "d:2", "contents": "x"}': 'no "vector" object of term weights',
           '{"id": "d:2", "vector": {"a": 3, "b": 0}}': 'the weight of "b" is 0, not a positive integer',
           '{"id": "d:2", "vector": {"a": 2.5}}': 'the weight of "a" is 2.5, not a positive integer'}
    for case, (line, what) in enumerate(bad.items()):
        shard = tmp_path / f"vectors-{case}" / "00000.jsonl.gz"
        shard.parent.mkdir()
        with gzip.open(shard, "wt", encoding="utf-8") as handle:
            handle.write("\n".join([*good[:2], line, good[2]]) + "\n")
        index = tmp_path / f"index-{case}"
        with Anserini(shard.parent, index, 1, "1g", collection="JsonVectorCollection", helpers=helpers,
                      options=IMPACT_OPTIONS, main=main) as run:
            with pytest.raises(IkatError) as err:
                run.wait(4)
        assert (err.value.path, err.value.where) == (str(shard), "line 3"), str(err.value)
        assert err.value.message.startswith(f"a bad vector record: {what}"), str(err.value)
        assert (err.value.fix or "").startswith("correct or remove that line")
        assert not list(index.glob("segments_*"))


def test_a_killed_encoding_resumes_equal_to_an_uninterrupted_one(sparse_index, subset, shallow, tmp_path):
    """SIGINT to the process group of `index sparse` after its first shard: the group ends, and the resumed command
    encodes only the shards left and ends with the same vectors and rankings as the uninterrupted index."""
    from stops import start, stop_when

    from ikatkit.cli import main
    from ikatkit.retrieve.sparse import SparseSearcher

    out = tmp_path / "splade"
    args = ["index", "sparse", str(subset), "--out", str(out), "--model", str(shallow), "--shard-size", str(SHARD),
            "--workers", "1"]
    log = tmp_path / "sparse.txt"
    stop_when(start(args, log), lambda: any((out / "vectors").glob("*.jsonl.gz")), signal.SIGINT, args, log)
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "vectors").glob("*.jsonl.gz")}
    assert 0 < len(kept) < PASSAGES // SHARD and not (out / "manifest.json").exists()
    assert main(args) == 0
    assert {name: (out / "vectors" / name).stat().st_mtime_ns for name in kept} == kept  # not encoded again
    resumed = _vectors(out)
    assert list(resumed.items()) == list(_vectors(sparse_index).items())
    query = {"q": "vegetarian protein for a marathon runner"}
    ranked = SparseSearcher(out).batch_search(query, 10)["q"]
    assert ranked == _brute_force(SparseSearcher(out).encoder.encode_queries(list(query.values()))[0], resumed)[:10]


def _stopped_job(subset: Path, shallow: Path, out: Path, **options) -> list[str]:
    """`index sparse` of the first 10 passages in shards of 5, stopped after its first chunk with ``options``; the
    command line that resumes it (without the options: the test adds them)."""
    from ikatkit.index.sparse import build_sparse

    ten = out.with_name(f"{out.name}-10.jsonl")
    ten.write_text("".join(subset.read_text(encoding="utf-8").splitlines(keepends=True)[:10]))

    with pytest.raises(KeyboardInterrupt):
        build_sparse([ten], out, model=str(shallow), shard_size=5, progress=Watched(stop_after=1), **options)
    return ["index", "sparse", str(ten), "--out", str(out), "--model", str(shallow), "--shard-size", "5"]


def test_batch_size_and_dtype_are_fingerprinted_and_bfloat16_is_near_float32(subset, shallow, sparse_index, ikat2023,
                                                                             ray_local, tmp_path, capsys):
    """One job stopped after its first chunk, begun at --batch-size 1 in bfloat16 (AMX on this CPU). Padding within a
    batch can move a quantized weight by 1, so the batch size is in work.json's fingerprint, as the dtype is: the job
    is refused at another batch size and in float32, each in one line naming the fix, and resumes with its own
    settings, which the manifest states. Its vectors are near the float32 index's (the same passages): most terms
    kept, the weights within 10% in L1, the top 5 of 5 queries mostly the same. float16 on a CPU is one line."""
    from ikatkit.cli import main
    from ikatkit.index.sparse_encoder import SparseEncoder

    out = tmp_path / "splade"
    args = _stopped_job(subset, shallow, out, batch_size=1, dtype="bfloat16")
    assert json.loads((out / "work.json").read_text())["batch_size"] == 1 and not (out / "manifest.json").exists()
    capsys.readouterr()
    assert main([*args, "--batch-size", "2", "--dtype", "bfloat16"]) == 2
    said = capsys.readouterr().err
    assert said.splitlines()[-1] == (f"ikatkit: error: {out}: an unfinished sparse index here was started with "
                                     "--batch-size 1, not 2 — fix: run it again with --batch-size 1, or remove the "
                                     "folder") and "Traceback" not in said
    assert main([*args, "--batch-size", "1"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"ikatkit: error: {out}: an unfinished sparse index here was started with --dtype bfloat16, not auto — fix: "
        "run it again with --dtype bfloat16, or remove the folder")
    assert main([*args, "--batch-size", "1", "--dtype", "bfloat16"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["parameters"]["batch_size"], manifest["counts"]["passages"]) == (1, 10)
    assert manifest["placement"] == {"device": "cpu", "dtype": "bfloat16", "tolerance": 5e-2, "batch_size": 1}
    near, exact = _vectors(out), _vectors(sparse_index)
    assert list(near) == list(exact)[:10]
    jaccard = [len(set(near[p]) & set(exact[p])) / len(set(near[p]) | set(exact[p])) for p in near]
    l1 = sum(abs(near[p].get(t, 0) - exact[p].get(t, 0)) for p in near for t in {*near[p], *exact[p]})
    assert min(jaccard) > 0.8 and l1 / sum(sum(exact[p].values()) for p in near) < 0.1
    encoder = SparseEncoder(str(shallow))
    queries = encoder.encode_queries(list(_queries(ikat2023, 5).values()))
    top = [[{pid for pid, _ in _brute_force(q, vectors)[:5]} for vectors in (near, {p: exact[p] for p in near})]
           for q in queries]
    assert sum(len(a & b) for a, b in top) >= 0.8 * sum(len(b) for _, b in top)
    assert main([*args[:4], str(tmp_path / "fp16"), *args[5:], "--dtype", "float16"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == ("ikatkit: error: dtype: float16 is not computed on the CPU — "
                                                        "fix: use bfloat16 or float32 (the default) on a CPU")


def test_a_log_shows_progress_within_a_shard(subset, shallow, tmp_path):
    """Issue 60: `index sparse` over the 40 passages in one shard at --batch-size 2 (a Ray call: 8 passes, 16
    passages), in a log with a line at every update ($IKATKIT_PROGRESS_EVERY=0): a line as each call returns, the
    counts rising to 40 of 40 with what is at work, then the closing line; the shard written once, whole."""
    import re
    import subprocess

    from stops import ENV

    out, log = tmp_path / "splade", tmp_path / "log.txt"
    args = ["index", "sparse", str(subset), "--out", str(out), "--model", str(shallow), "--shard-size", "40",
            "--batch-size", "2", "--workers", "1", "--index-threads", "1"]
    with log.open("w") as stderr:
        done = subprocess.run([sys.executable, "-m", "ikatkit.cli", *args], env={**ENV, "IKATKIT_PROGRESS_EVERY": "0"},
                              stdout=subprocess.DEVNULL, stderr=stderr, timeout=600)
    lines = re.findall(r"^encoded: ([\d,]+) of 40 passages in .*$", log.read_text(), re.MULTILINE)
    counts = [int(count) for count in lines]
    assert done.returncode == 0 and len(counts) == 4 and counts[-2:] == [40, 40], log.read_text()
    assert counts[0] in (8, 16) and counts[1] in (counts[0] + 8, counts[0] + 16) and counts[1] < 40
    assert re.search(r"^encoded: 40 of 40 passages in .* \(done\)$", log.read_text(), re.MULTILINE)
    assert re.search(r"^encoded: 8 of 40 passages in .*, now: encoding on 1 actor$", log.read_text(), re.MULTILINE) \
        or re.search(r"^encoded: 16 of 40 passages in .*, now: encoding on 1 actor$", log.read_text(), re.MULTILINE)
    assert [p.name for p in (out / "vectors").iterdir()] == ["00000.jsonl.gz"]


def test_hybrid_config_fuses_splade_with_bm25(sparse_index, passages_index, ikat2023, tmp_path):
    """A splade and a bm25 retrieve fused by the fuse stage: the fused list is fusion.weighted of the two lists."""
    from ikatkit.pipelines.config import Resources, build_stages, load_config
    from ikatkit.pipelines.record import records_for
    from ikatkit.retrieve.fusion import weighted
    from ikatkit.topics import load_topics

    config = tmp_path / "hybrid.toml"
    config.write_text(f'name = "hybrid"\n[resources.bm25]\nkind = "bm25"\n[resources.splade]\nkind = "splade"\n'
                      f'path = "{sparse_index}"\n[[stages]]\nstage = "manual_query"\n'
                      '[[stages]]\nstage = "retrieve"\nsearcher = "bm25"\nk = 50\nexpand_ptkb = false\n'
                      '[[stages]]\nstage = "retrieve"\nsearcher = "splade"\nk = 50\nexpand_ptkb = false\n'
                      '[[stages]]\nstage = "fuse"\nmethod = "weighted"\nweights = [0.3, 0.7]\n', encoding="utf-8")
    loaded = load_config(config)
    stages = build_stages(loaded, Resources(loaded, passages_index, tmp_path))
    records = records_for(load_topics(ikat2023 / "test_topics.json"))[:2]
    for stage in stages:
        records = stage.transform(records)
    for record in records:
        bm25, splade = stages[1].searcher.search(record.query, 50), stages[2].searcher.search(record.query, 50)
        assert bm25 and splade and record.ranking == weighted([bm25, splade], k=len(record.ranking),
                                                              weights=[0.3, 0.7])


def test_search_command_writes_splade_and_hybrid_runs(sparse_index, passages_index, ikat2023, tmp_path):
    """`ikatkit search --sparse` writes the SPLADE searcher's rankings as a TREC run named splade; with --index, the
    weighted fusion of BM25's and SPLADE's lists at --sparse-weight (BM25 the rest)."""
    from ikatkit.cli import main
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.retrieve.fusion import weighted
    from ikatkit.retrieve.sparse import SparseSearcher

    queries = _queries(ikat2023, 4)
    query_file = tmp_path / "queries.tsv"
    query_file.write_text("".join(f"{qid}\t{text}\n" for qid, text in queries.items()), encoding="utf-8")
    alone, hybrid = tmp_path / "splade.trec", tmp_path / "hybrid.trec"
    assert main(["search", "--sparse", str(sparse_index), "--queries", str(query_file), "--k", "20",
                 "--out", str(alone)]) == 0
    assert main(["search", "--sparse", str(sparse_index), "--index", str(passages_index), "--fusion", "weighted",
                 "--sparse-weight", "0.7", "--queries", str(query_file), "--k", "20", "--out", str(hybrid)]) == 0
    splade = SparseSearcher(sparse_index).batch_search(queries, 20)
    bm25 = Bm25Searcher(passages_index).batch_search(queries, 20)
    for path, name in ((alone, "splade"), (hybrid, "bm25+splade")):
        rows = [line.split() for line in path.read_text().splitlines()]
        assert {r[5] for r in rows} == {name} and {r[0] for r in rows} == set(queries)
        for qid in queries:
            written = [(r[2], float(r[4])) for r in rows if r[0] == qid]
            expected = splade[qid] if path == alone else weighted([bm25[qid], splade[qid]], k=20, weights=[0.3, 0.7])
            assert expected and [pid for pid, _ in written] == [pid for pid, _ in expected]
            assert [s for _, s in written] == pytest.approx([s for _, s in expected], abs=1e-4)


@pytest.mark.parametrize(("weights", "said"), [
    (["--sparse", "s", "--dense-weight", "0.3", "--fusion", "weighted"], "--dense-weight without --dense"),
    (["--sparse", "s", "--index", "i", "--sparse-weight", "0.7"], "weights are for the weighted fusion"),
    (["--sparse", "s", "--dense", "d", "--index", "i", "--fusion", "weighted", "--sparse-weight", "0.7",
      "--dense-weight", "0.5"], "the named weights sum to 1.2, not 1"),
    (["--sparse", "s", "--index", "i", "--fusion", "weighted", "--sparse-weight", "1.5"], "not in [0, 1]"),
])
def test_search_fusion_weights_are_checked_before_anything_loads(weights, said, tmp_path, capsys):
    from ikatkit.cli import main

    assert main(["search", *weights, "--queries", str(tmp_path / "none.tsv"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert said in err and " — fix: " in err and err.count("\n") == 1


def test_missing_model_and_wrong_index_are_one_clear_error(passages_index, sparse_index, monkeypatch):
    from ikatkit.index.sparse_encoder import load_splade
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.pipelines.resources import resource
    from ikatkit.retrieve.sparse import SparseSearcher

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(IkatError, match="not available offline") as err:
        load_splade("naver/splade-cocondenser-ensembledistil")
    assert "hf download naver/splade-cocondenser-ensembledistil" in (err.value.fix or "")
    # one line, not Hugging Face's two cut mid-URL ("... offline mode at 'https://)", issue 69)
    assert "\n" not in str(err.value) and "https://" not in str(err.value)
    with pytest.raises(IkatError, match="names its index folder"):
        resource("s", {"kind": "splade", "model": "x"})
    with pytest.raises(IkatError, match="this is a Lucene BM25 index, not a learned sparse") as err:
        SparseSearcher(passages_index)
    assert "`ikatkit search --index DIR`" in (err.value.fix or "") and 'kind = "bm25"' in (err.value.fix or "")
    with pytest.raises(IkatError, match="this is a learned sparse .SPLADE. impact index, not a Lucene BM25"):
        Bm25Searcher(sparse_index)
    from ikatkit.pipelines.resources import Where, build_resource

    with pytest.raises(IkatError, match="unknown option 'max_length'") as err:  # the organizers' index's option
        build_resource("s", resource("s", {"kind": "sparse", "path": str(sparse_index), "max_length": 64}),
                       Where(None, Path("/tmp")))
    assert err.value.where == "max_length"


def test_a_query_model_other_than_the_index_s_is_refused_unless_asked_for(sparse_index, models, tmp_path, capsys):
    """A checkpoint without a masked-LM head is no SPLADE model (transformers would fill the head with random weights
    and the run would look normal); another SPLADE model than the manifest's is refused unless asked for, and then
    the run says which model encoded the queries; one of another vocabulary is refused in any case (issue 69)."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from ikatkit.cli import main
    from ikatkit.models import resolve_model

    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tvegetarian protein for a marathon\n", encoding="utf-8")
    other = random_splade(models / "bert-1-layer-32", layers=1, hidden=32)
    small = tmp_path / "small-vocabulary"
    BertForMaskedLM(BertConfig(vocab_size=1000, num_hidden_layers=1, hidden_size=32, num_attention_heads=1,
                               intermediate_size=64)).save_pretrained(small)
    AutoTokenizer.from_pretrained(resolve_model("bundled:minilm")).save_pretrained(small)

    def search(*options: str) -> tuple[int, str, str]:
        code = main(["search", "--sparse", str(sparse_index), "--queries", str(queries), "--k", "5",
                     "--out", str(tmp_path / "run.trec"), *options])
        out, err = capsys.readouterr()
        return code, out, err

    code, _, err = search("--sparse-model", str(other))
    assert code == 2 and "not by the query model" in err and "--allow-other-model" in err and "Traceback" not in err
    code, _, err = search("--sparse-model", "bundled:minilm", "--allow-other-model")
    assert code == 2 and "has no masked-LM head" in err and "not a SPLADE model" in err
    assert not (tmp_path / "run.trec").exists()
    code, _, err = search("--sparse-model", str(small), "--allow-other-model")
    assert code == 2 and "vocabulary of 1000 terms, the index's 30522" in err
    code, out, _ = search("--sparse-model", str(other), "--allow-other-model")
    assert code == 0 and f"(queries encoded by {other})" in out
    code, out, err = search()
    manifest = json.loads((sparse_index / "manifest.json").read_text(encoding="utf-8"))
    assert code == 0 and f"(queries encoded by {manifest['model']})" in out
    assert f"opening {sparse_index} (splade)" in err and "searching 1 query (k=5) with splade" in err


def test_the_baseline_config_runs_and_validates(sparse_index, passages_index, ikat2023, tmp_path):
    """configs/splade_rr_baseline.toml with what loads here substituted (the random-weight SPLADE index, a
    cross-encoder built from the bundled MiniLM with an untrained head, the bundled SmolLM2): a 2023 test conversation
    runs through SPLADE top 1,000, re-ranking and generation, and the run validates."""
    import torch
    from sentence_transformers import CrossEncoder

    from ikatkit.models import resolve_model
    from ikatkit.pipelines import run_pipeline
    from ikatkit.topics import load_topics

    torch.manual_seed(0)
    cross_encoder = tmp_path / "cross-encoder"
    CrossEncoder(resolve_model("bundled:minilm"), num_labels=1).save(str(cross_encoder))
    text = (ROOT / "configs" / "splade_rr_baseline.toml").read_text(encoding="utf-8")
    for shipped, here in (('model = "meta-llama/Llama-3.1-8B-Instruct"\nmax_new_tokens = 256\ndevice = "cuda"  # an 8B '
                           'LLM: on a GPU (ikatkit configs lists it; refused on a CPU before anything loads)',
                           'model = "bundled:smollm2"\nmax_new_tokens = 24'),
                          ('model = "cross-encoder/ms-marco-MiniLM-L-12-v2"', f'model = "{cross_encoder}"'),
                          ('path = "indexes/ikat23-splade"\nmodel = "naver/splade-cocondenser-ensembledistil"',
                           f'path = "{sparse_index}"')):
        assert shipped in text
        text = text.replace(shipped, here)
    config = tmp_path / "splade_rr_baseline.toml"
    config.write_text(text, encoding="utf-8")
    topics = load_topics(ikat2023 / "test_topics.json").subset(["9-1"])
    outcome = run_pipeline(config, topics, tmp_path / "run", index=passages_index, cache_dir=tmp_path / "cache")
    assert outcome.valid is True and len(outcome.records) == len(topics)
    # the run's manifest names the model that encoded the queries: the config names none, so the index's (issue 69)
    written = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert written["resource_stats"]["splade"] == {
        "index": str(sparse_index), "query_max_length": 128,
        "query_model": json.loads((sparse_index / "manifest.json").read_text(encoding="utf-8"))["model"]}
    vectors = _vectors(sparse_index)
    for record in outcome.records:
        assert record.response.strip() and record.ranking
        assert {pid for pid, _ in record.ranking} <= set(vectors)
