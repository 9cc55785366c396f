"""Indexes of every kind built by the previous release (tests/data/release-56c3078, made by its make.py with that
release's code: BM25, dense, learned sparse, partitioned) open and search unchanged; the code of today builds the same
vectors, postings, partitions and rankings from the same 24 demo passages, and its manifests differ from the release's
only in what the one foundation adds (the kind of a Lucene index, the placement the actors ran with, the asked dtype
and options, the shared keys of a partitions manifest)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

RELEASE = Path(__file__).resolve().parent / "data" / "release-56c3078"
ROOT = Path(__file__).resolve().parents[1]
K = 20
VARYING = {"seconds", "built", "versions", "source", "sources", "model"}  # times, versions, paths of this machine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded() -> dict[str, dict[str, list[list]]]:
    return json.loads((RELEASE / "rankings.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def queries() -> dict[str, str]:
    from ikatkit.pipelines.demo import demo_data
    from ikatkit.topics import load_topics

    return load_topics(demo_data() / "topics.json").queries("manual")


def _lists(found: dict[str, list[tuple[str, float]]]) -> dict[str, list[list]]:
    return {qid: [[pid, float(score)] for pid, score in hits] for qid, hits in found.items()}


def _added(before: dict, after: dict, path: str = "") -> set[str]:
    """The keys ``after`` has that ``before`` lacks, failing on a shared key whose value changed (outside
    :data:`VARYING`)."""
    added = set()
    for key, value in after.items():
        where = f"{path}{key}"
        if key not in before:
            added.add(where)
        elif key in VARYING:
            continue
        elif isinstance(value, dict) and isinstance(before[key], dict):
            added |= _added(before[key], value, f"{where}.")
        else:
            assert before[key] == value, where
    assert not set(before) - set(after), set(before) - set(after)
    return added


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text(encoding="utf-8"))


def test_a_bm25_index_of_the_previous_release(recorded, queries, tmp_path):
    from ikatkit.artifact import open_index
    from ikatkit.index.build import build_index
    from ikatkit.index.lucene import postings_summary

    old = open_index(RELEASE / "bm25", "bm25")
    assert old.kind == "bm25" and "kind" not in _manifest(RELEASE / "bm25")  # an earlier manifest names no kind
    assert _lists(old.searcher(threads=1).batch_search(queries, K)) == recorded["bm25"]
    new = tmp_path / "bm25"
    build_index([RELEASE / "passages.jsonl"], new, threads=1)
    assert postings_summary(new) == postings_summary(RELEASE / "bm25")
    assert _lists(open_index(new).searcher(threads=1).batch_search(queries, K)) == recorded["bm25"]
    texts = open_index(new).texts()
    pids = [hit[0] for hits in recorded["bm25"].values() for hit in hits]
    assert texts(pids) == old.texts()(pids) and len(texts(pids)) == len(set(pids))
    assert _added(_manifest(RELEASE / "bm25"), _manifest(new)) == {"kind", "parameters.format_option"}


def test_a_dense_index_of_the_previous_release(recorded, queries, ray_local, tmp_path):
    from ikatkit.artifact import open_index
    from ikatkit.index.dense import build_dense

    assert _lists(open_index(RELEASE / "dense").searcher().batch_search(queries, K)) == recorded["dense"]
    new = tmp_path / "dense"
    build_dense([RELEASE / "passages.jsonl"], new, shard_size=10)
    for shard in range(3):
        name = f"embeddings/{shard:05d}.npy"
        assert np.array_equal(np.load(new / name), np.load(RELEASE / "dense" / name)), name
    assert _lists(open_index(new).searcher().batch_search(queries, K)) == recorded["dense"]
    assert _added(_manifest(RELEASE / "dense"), _manifest(new)) == {"placement.batch_size", "parameters.dtype"}


@pytest.fixture(scope="module")
def splade(tmp_path_factory) -> str:
    """The random-weight SPLADE model of the release's sparse index (the same seed, the same weights)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from splade_random import random_splade

    return str(random_splade(tmp_path_factory.mktemp("release-splade") / "bert-base-2-layers", layers=2))


def test_a_sparse_index_of_the_previous_release(recorded, queries, splade, ray_local, tmp_path_factory):
    from ikatkit.artifact import open_index
    from ikatkit.index.lucene import postings_summary
    from ikatkit.index.sparse import build_sparse

    model = splade
    old = open_index(RELEASE / "sparse", "splade")  # the kind's name that configs wrote
    # its manifest names the model by the path it had where it was made: this one is asked for explicitly
    assert _lists(old.searcher(model=model, threads=1, other_model=True).batch_search(queries, K)) == \
        recorded["sparse"]
    new = tmp_path_factory.mktemp("release-sparse") / "sparse"
    build_sparse([RELEASE / "passages.jsonl"], new, model=model, shard_size=10, index_threads=1)
    for shard in range(3):
        name = f"vectors/{shard:05d}.jsonl.gz"
        assert gzip.open(new / name).read() == gzip.open(RELEASE / "sparse" / name).read(), name
    assert postings_summary(new) == postings_summary(RELEASE / "sparse")
    assert _lists(open_index(new, "sparse").searcher(threads=1).batch_search(queries, K)) == recorded["sparse"]
    assert _added(_manifest(RELEASE / "sparse"), _manifest(new)) == {"vocabulary", "placement.batch_size",
                                                                      "parameters.dtype"}


def test_the_ptkb_expansion_default_fits_each_kinds_searcher(splade):
    """A retrieve stage that writes no ``expand_ptkb`` appends the PTKB statements to BM25's queries (words to match)
    and not to the dense and learned sparse encoders' (trained on short queries), as ``ikatkit stages`` says; a
    config's ``expand_ptkb`` decides either way."""
    from ikatkit.artifact import open_index
    from ikatkit.pipelines.registry import stage_table
    from ikatkit.stages.core import Retrieve

    searchers = {"bm25": open_index(RELEASE / "bm25").searcher(threads=1),
                 "dense": open_index(RELEASE / "dense").searcher(),
                 "sparse": open_index(RELEASE / "sparse", "splade").searcher(model=splade, threads=1, other_model=True)}
    assert {kind: Retrieve(searcher).expand_ptkb for kind, searcher in searchers.items()} == \
        {"bm25": True, "dense": False, "sparse": False}
    assert not Retrieve(searchers["bm25"], expand_ptkb=False).expand_ptkb
    assert Retrieve(searchers["sparse"], expand_ptkb=True).expand_ptkb
    said = next(row for row in stage_table() if row["name"] == "retrieve")["summary"]  # what `ikatkit stages` prints
    assert "BM25 appends them" in said and "dense and learned sparse encoders" in said
    assert "search the query alone" in said


def test_a_partitioned_index_of_the_previous_release(recorded, queries, ray_local, tmp_path):
    """2 MiniLM clusters of the BM25 index's passages: the release's partitions search unchanged, and today's build
    (its passages embedded on Ray's actors, where the release embedded them in one process) puts each passage in
    the same partition with the same centroids, postings and rankings."""
    from ikatkit.artifact import open_index
    from ikatkit.index.job import read_source
    from ikatkit.index.lucene import postings_summary
    from ikatkit.partition.build import embeddings_cache, partition_index

    def rankings(folder: Path) -> dict[str, dict[str, list[list]]]:
        searcher = open_index(folder, "partitions").searcher(threads=1)
        return {str(choice): _lists(searcher.batch_search(queries, K, partitions=choice))
                for choice in ([0], [1], [0, 1])}

    old = RELEASE / "partitions"
    assert rankings(old) == recorded["partitions"]
    new = tmp_path / "partitions"
    cached = embeddings_cache(read_source([RELEASE / "bm25"])[0], "bundled:minilm")
    cached.unlink(missing_ok=True)  # embedded here, by the job's actors
    try:
        partition_index(RELEASE / "bm25", new, "cluster", 2, threads=1)
    finally:
        cached.unlink(missing_ok=True)
    before, after = (json.loads((folder / "partitions.json").read_text(encoding="utf-8")) for folder in (old, new))
    assert [(p["name"], p["passages"]) for p in after["parts"]] == \
        [(p["name"], p["passages"]) for p in before["parts"]]
    for part in before["parts"]:
        assert postings_summary(new / part["name"]) == postings_summary(old / part["name"]), part["name"]
    assert rankings(new) == recorded["partitions"]
    same = set(before) - VARYING - {"fingerprint", "parts"}  # the fingerprint hashes the source's path
    assert {key: after[key] for key in same} == {key: before[key] for key in same}
    # what the one manifest writer adds: the shared keys
    assert set(after) - set(before) == {"kind", "counts", "parameters", "versions"} and after["kind"] == "partitions"
