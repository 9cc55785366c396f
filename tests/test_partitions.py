"""Partitioned indexes (M-RAG, issue 19): real Lucene partitions of the 894 real passages, search across them."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from ikatkit.errors import IkatError

STREAM = r"^clueweb22-(en\d+)"  # the ClueWeb22 stream of a passage id: 47 categories among the 894 passages


@pytest.fixture(scope="session")
def category_parts(passages_index, tmp_path_factory):
    """The 894 passages in 3 real partition indexes by ClueWeb22 stream (no embeddings needed)."""
    from ikatkit.partition.build import partition_index

    out = tmp_path_factory.mktemp("partitions") / "stream3"
    partition_index(passages_index, out, "category", 3, field="id", pattern=STREAM, threads=1)
    return out


def _ids(index):
    from ikatkit.index.job import read_source

    return [record["id"] for record in read_source([index])[1]]


def test_category_partitions_hold_each_passage_once_by_its_category(category_parts, passages_jsonl):
    manifest = json.loads((category_parts / "partitions.json").read_text())
    every = [json.loads(line)["id"] for line in passages_jsonl.read_text().splitlines()]
    streams = {pid: re.match(STREAM, pid).group(1) for pid in every}
    assert len(manifest["categories"]) == len(set(streams.values())) == 47
    seen = []
    for number, part in enumerate(manifest["parts"]):
        ids = _ids(category_parts / part["name"])
        assert len(ids) == part["passages"]
        assert {manifest["categories"][streams[pid]] for pid in ids} == {number}
        seen += ids
    assert sorted(seen) == sorted(every) and len(every) == 894
    sizes = [part["passages"] for part in manifest["parts"]]
    assert max(sizes) - min(sizes) <= 37  # packed largest category first: within the largest category (37)
    assert manifest["centroids"] is None and manifest["embedding"] is None


@pytest.mark.parametrize("queries", ["raw", "manual"])
def test_all_partitions_rank_and_score_exactly_as_the_whole_index(category_parts, passages_index, ikat2023, queries):
    from ikatkit.retrieve.partitioned import PartitionedSearcher
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.topics import load_topics

    texts = load_topics(ikat2023 / "test_topics.json").queries(queries)
    assert len(texts) == 332
    whole = Bm25Searcher(passages_index).batch_search(texts, 1000)
    parts = PartitionedSearcher(category_parts).batch_search(texts, 1000)
    assert sum(map(len, whole.values())) > 190_000
    assert parts == whole  # the same ids in the same order with the same (float32) scores, every utterance


def test_one_partition_is_searched_as_its_own_index(category_parts, ikat2023):
    from ikatkit.retrieve.partitioned import PartitionedSearcher
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.topics import load_topics

    texts = load_topics(ikat2023 / "train_topics.json").queries("raw")
    searcher = PartitionedSearcher(category_parts)
    for part in range(3):
        alone = Bm25Searcher(category_parts / f"part-{part:03d}").batch_search(texts, 100)
        assert searcher.batch_search(texts, 100, partitions=[part]) == alone
    members = set(_ids(category_parts / "part-001"))
    chosen = {qid: [1] if n % 2 else [0, 2] for n, qid in enumerate(texts)}
    found = searcher.batch_search(texts, 50, partitions=chosen)
    for n, qid in enumerate(texts):
        assert all((pid in members) == bool(n % 2) for pid, _ in found[qid])
    top = found[next(iter(texts))][0][0]
    assert searcher.texts([top, "clueweb22-en0000-00-00000:99"]).keys() == {top}
    with pytest.raises(IkatError, match="no partition 3"):
        searcher.batch_search(texts, 10, partitions=[3])


def test_finished_partitions_are_kept_and_a_mismatch_is_one_clear_error(category_parts, passages_index, tmp_path):
    from ikatkit.partition.build import partition_index
    from ikatkit.retrieve.partitioned import load_manifest

    before = (category_parts / "partitions.json").read_text()
    assert partition_index(passages_index, category_parts, "category", 3, field="id", pattern=STREAM)["parts"]
    assert (category_parts / "partitions.json").read_text() == before
    with pytest.raises(IkatError, match="another source or other parameters"):
        partition_index(passages_index, category_parts, "category", 2, field="id", pattern=STREAM)
    copy = tmp_path / "copy"
    shutil.copytree(category_parts, copy)
    manifest = json.loads(before)
    manifest["parts"][1]["passages"] += 1
    (copy / "partitions.json").write_text(json.dumps(manifest))
    with pytest.raises(IkatError, match="partition part-001 does not match the manifest"):
        load_manifest(copy)
    (copy / "partitions.json").write_text(before)
    assert load_manifest(copy)["passages"] == 894
    shutil.rmtree(copy / "part-002")
    with pytest.raises(IkatError, match="part-002 has no finished index"):
        load_manifest(copy)
    (copy / "partitions.json").unlink()  # as if interrupted: finished parts of another partitioning are not reused
    with pytest.raises(IkatError, match="unfinished partitioning of another source or other parameters"):
        partition_index(passages_index, copy, "category", 2, field="id", pattern=STREAM)


@pytest.mark.parametrize("strategy, m, options, message", [
    ("cluster", 0, {}, "less than 1"),
    ("category", 900, {"field": "id"}, "more than the 894 passages"),
    ("category", 48, {"field": "id", "pattern": STREAM}, "only 47 categories for 48 partitions"),
    ("category", 2, {"field": "url"}, "has no field 'url'"),
    ("category", 2, {}, "needs --field"),
    ("hash", 2, {}, "unknown strategy 'hash'"),
])
def test_bad_input_is_one_clear_error(passages_index, tmp_path, strategy, m, options, message):
    from ikatkit.partition.build import partition_index

    with pytest.raises(IkatError, match=message):
        partition_index(passages_index, tmp_path / "out", strategy, m, **options)
    assert not (tmp_path / "out" / "partitions.json").exists()


def test_cli_reports_bad_input_without_a_traceback(demo_index, tmp_path, capsys):
    from ikatkit.cli import main

    assert main(["index", "partition", str(demo_index), "--strategy", "cluster", "--partitions", "0",
                 "--out", str(tmp_path / "out")]) == 2
    assert "--partitions 0 is less than 1" in capsys.readouterr().err


def _planted(seed=3, per=40, clusters=4, dim=32):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    points = np.repeat(centres, per, axis=0) + 0.05 * rng.standard_normal((clusters * per, dim))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points.astype(np.float32), np.repeat(np.arange(clusters), per)


def _same_partition(found, planted):
    """Whether two labelings split the points the same way (labels may be permuted)."""
    return len(set(zip(found.tolist(), planted.tolist()))) == len(set(planted.tolist())) == len(set(found.tolist()))


@pytest.mark.filterwarnings("ignore:Graph is not fully connected")  # planted clusters: 4 components
@pytest.mark.parametrize("strategy", ["cluster", "graph"])
def test_cluster_and_graph_recover_planted_clusters(strategy):
    from ikatkit.partition.strategies import assign

    points, planted = _planted()
    found = assign(strategy, 4, 0, points)
    assert _same_partition(found, planted)
    assert np.array_equal(found, assign(strategy, 4, 0, points))


def test_lsh_buckets_near_duplicates_together_and_depends_on_the_seed():
    from ikatkit.partition.strategies import lsh

    points, planted = _planted(per=50, clusters=8)
    found = lsh(points, 4, seed=1)
    assert np.array_equal(found, lsh(points, 4, seed=1)) and set(found.tolist()) <= {0, 1, 2, 3}
    # the 50 noisy copies of one centre nearly always share its bucket
    agree = [np.bincount(found[planted == c]).max() / 50 for c in range(8)]
    assert min(agree) >= 0.9
    assert not np.array_equal(found, lsh(points, 4, seed=2))


def test_categories_pack_largest_first_into_the_emptiest_partition():
    from ikatkit.partition.strategies import pack_categories

    codes = np.array([0] * 5 + [1] * 4 + [2] * 3 + [3] * 2 + [4])
    labels, mapping = pack_categories(codes, ["a", "b", "c", "d", "e"], 2)
    assert mapping == {"a": 0, "b": 1, "c": 1, "d": 0, "e": 0}
    assert np.bincount(labels).tolist() == [8, 7]


def test_cluster_partitions_of_a_collection_carry_minilm_centroids(passages_jsonl, tmp_path):
    from sentence_transformers import SentenceTransformer

    from ikatkit.models import resolve_model
    from ikatkit.partition.build import partition_index

    lines = passages_jsonl.read_text().splitlines()[:40]
    collection = tmp_path / "forty.jsonl"
    collection.write_text("\n".join(lines) + "\n")
    manifest = partition_index(collection, tmp_path / "out", "cluster", 2, threads=1)
    assert [p["passages"] for p in manifest["parts"]] and sum(p["passages"] for p in manifest["parts"]) == 40
    texts = {json.loads(line)["id"]: json.loads(line)["contents"] for line in lines}
    model = SentenceTransformer(resolve_model("bundled:minilm"), device="cpu")
    for number, part in enumerate(manifest["parts"]):
        ids = _ids(tmp_path / "out" / part["name"])
        mean = model.encode([texts[pid] for pid in ids], normalize_embeddings=True).mean(axis=0)
        assert np.allclose(manifest["centroids"][number], mean / np.linalg.norm(mean), atol=1e-4)
    assert manifest["embedding"] == {"model": "bundled:minilm", "dimension": 384, "normalized": True}


def _bandit(seed, count=300, m=3, width=4):
    """States whose feature 2 marks the rewarded partition (reward 1 there, 0.1 elsewhere)."""
    rng = np.random.default_rng(seed)
    states = rng.uniform(0, 0.5, (count, m, width)).astype(np.float32)
    best = rng.integers(m, size=count)
    states[np.arange(count), best, 2] += 0.5
    rewards = np.full((count, m), 0.1, dtype=np.float32)
    rewards[np.arange(count), best] = 1.0
    return states, rewards, best


def test_dqn_is_deterministic_given_a_seed_and_learns_the_rewarded_partition():
    import torch

    from ikatkit.partition.selector import Policy, train_dqn

    states, rewards, _ = _bandit(0)
    first, again, other = (train_dqn(states, rewards, seed, episodes=8000) for seed in (7, 7, 8))
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert not all(torch.equal(first[name], other[name]) for name in first)
    policy = Policy(first, 3, ["a", "b", "c", "d"], "fingerprint")
    held, _, best = _bandit(1)
    assert np.mean([policy.choose(state) == b for state, b in zip(held, best)]) >= 0.9


def test_selector_stage_retrieves_from_agent_s_choice_and_the_policy_refuses_other_partitions(
        category_parts, ikat2023, tmp_path):
    from ikatkit.retrieve.partitioned import PartitionedSearcher
    from ikatkit.partition.selector import Policy, judged_turns, train_selector
    from ikatkit.pipelines.record import TurnRecord, records_for
    from ikatkit.stages.core import STAGES, Retrieve
    from ikatkit.rank import make_ranker
    from ikatkit.topics import load_topics

    train = load_topics(ikat2023 / "train_topics.json")
    judged = judged_turns(train, None, provenance=True)
    assert len(judged) == 76 and all(  # 76 of the 95 train turns cite passages
        set(rels.values()) == {2} for rels in judged.values())
    queries = {qid: text for qid, text in train.queries("manual").items() if qid in list(judged)[:10]}
    searcher = PartitionedSearcher(category_parts)
    encoder = make_ranker("bi-encoder", "bundled:minilm")
    policy_file = tmp_path / "agent-s.pt"
    trained = train_selector(category_parts, queries, judged, encoder.encode, policy_file, seed=0, episodes=2000,
                             top=1, searcher=searcher)
    assert trained.meta["turns"] == list(queries) and trained.features == [
        "log_bm25_top", "bm25_top_ratio", "best_cosine", "mean_cosine"]

    stage = STAGES["select_partition"](searcher, encoder, str(policy_file), top=1)
    assert stage.requires == ("query",) and stage.provides == ("partitions",)
    records = [r for r in records_for(train) if r.qid in queries][:4]
    for record in records:
        record.query = queries[record.qid]
    stage.transform(records)
    assert all(len(r.partitions) == 1 and 0 <= r.partitions[0] < 3 for r in records)
    Retrieve(searcher, k=20, expand_ptkb=False).transform(records)
    for record in records:
        members = set(_ids(category_parts / f"part-{record.partitions[0]:03d}"))
        assert record.ranking and {pid for pid, _ in record.ranking} <= members
        assert TurnRecord.from_json(json.loads(json.dumps(record.to_json()))).partitions == record.partitions

    other = dict(searcher.manifest, fingerprint="0" * 64)
    with pytest.raises(IkatError, match="trained on other partitions"):
        Policy.load(policy_file, other)
    with pytest.raises(IkatError, match="no centroids"):
        STAGES["select_partition"](searcher, encoder, method="centroid")


def test_a_url_category_is_its_host_and_a_pattern_takes_its_group():
    from ikatkit.partition.build import Categories

    assert Categories("url")({"id": "a", "url": "https://www.nhs.uk/conditions/ibs/"}, "passage 1") == "www.nhs.uk"
    assert Categories("id", STREAM)({"id": "clueweb22-en0034-09-03452:1"}, "passage 1") == "en0034"
    with pytest.raises(IkatError, match="--pattern does not match id 'msmarco-1'"):
        Categories("id", STREAM)({"id": "msmarco-1"}, "passage 1")
    with pytest.raises(IkatError, match="has no group"):
        Categories("id", "^clueweb22")
