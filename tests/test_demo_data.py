"""The embedded demo data: it parses, its ids exist after the project's segmentation, its judgements agree."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ikatkit.collection.readers import ReadStats, read_passages
from ikatkit.collection.segment import rule_splitter
from ikatkit.evaluate.qrels import load_qrels
from ikatkit.pipelines.demo import demo_data
from ikatkit.topics import Topics, load_topics

DOCUMENTS, PASSAGES = 60, 202


@pytest.fixture(scope="module")
def data() -> Path:
    return demo_data()


@pytest.fixture(scope="module")
def passages(data: Path) -> dict[str, str]:
    stats = ReadStats()
    found = {p.id: p.contents for p in read_passages(data / "clueweb22" / "en0000-00.json", "clueweb22", stats)}
    assert (stats.documents, stats.passages, stats.skipped) == (DOCUMENTS, PASSAGES, 0)
    return found


@pytest.fixture(scope="module")
def topics(data: Path) -> Topics:
    return load_topics(data / "topics.json")


def test_records_are_raw_clueweb22(data: Path):
    records = [json.loads(line) for line in (data / "clueweb22" / "en0000-00.json").read_text().splitlines()]
    assert [r["ClueWeb22-ID"] for r in records] == [f"clueweb22-en0000-00-{i:05d}" for i in range(DOCUMENTS)]
    for record in records:
        assert set(record) == {"URL", "URL-hash", "Language", "ClueWeb22-ID", "Clean-Text"}
        assert record["URL-hash"] == hashlib.md5(record["URL"].encode()).hexdigest().upper()
        assert record["Language"] == "en" and record["URL"].startswith("https://")
        sentences = rule_splitter(record["Clean-Text"].replace("\n", " "))
        assert 15 <= len(sentences) <= 40, record["ClueWeb22-ID"]
    assert len({r["URL"] for r in records}) == DOCUMENTS


def test_topics_load_with_provenance_in_the_collection(topics: Topics, passages: dict[str, str]):
    assert topics.year == 2023 and [c.id for c in topics.conversations] == ["demo-1", "demo-2"]
    assert [len(c.turns) for c in topics.conversations] == [6, 6] and len(topics) == 12
    assert [len(c.ptkb) for c in topics.conversations] == [9, 9]
    for turn in topics:
        assert turn.resolved_utterance and turn.response and turn.ptkb_provenance
        assert turn.response_provenance and set(turn.response_provenance) <= set(passages)
        assert set(turn.ptkb_provenance) <= set(topics.conversation_of(turn.qid).ptkb)


def test_passage_qrels_judge_collection_passages(data: Path, topics: Topics, passages: dict[str, str]):
    qrels = load_qrels(data / "qrels.txt")
    assert list(qrels) == topics.qids
    assert sum(len(docs) for docs in qrels.values()) == 349
    assert {pid for docs in qrels.values() for pid in docs} <= set(passages)
    assert {g for docs in qrels.values() for g in docs.values()} == {0, 1, 2, 3, 4}
    for turn in topics:
        assert all(qrels[turn.qid][pid] >= 2 for pid in turn.response_provenance), turn.qid


def test_ptkb_qrels_match_ptkb_provenance(data: Path, topics: Topics):
    ptkb = load_qrels(data / "ptkb_qrels.txt")
    assert list(ptkb) == topics.qids
    for turn in topics:
        assert set(ptkb[turn.qid]) == set(topics.conversation_of(turn.qid).ptkb)
        assert {k for k, g in ptkb[turn.qid].items() if g == 1} == set(turn.ptkb_provenance), turn.qid


def test_demo_index_rewards_rewriting(data: Path, topics: Topics, tmp_path_factory: pytest.TempPathFactory):
    """BM25 over the real demo index: resolved utterances find the judged passages far better than raw ones."""
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.index.build import build_index
    from ikatkit.retrieve.bm25 import Bm25Searcher

    index = tmp_path_factory.mktemp("demo") / "index"
    manifest = build_index([data / "clueweb22"], index, fmt="clueweb22")
    assert (manifest["counts"]["documents"], manifest["counts"]["passages"]) == (DOCUMENTS, PASSAGES)
    searcher, qrels = Bm25Searcher(index), load_qrels(data / "qrels.txt")
    ndcg = {}
    for kind in ("raw", "manual"):
        hits = searcher.batch_search(topics.queries(kind), 100)
        ndcg[kind] = evaluate({q: dict(hs) for q, hs in hits.items()}, qrels).mean["nDCG@5"]
    assert ndcg["manual"] > 0.6 and ndcg["manual"] - ndcg["raw"] > 0.15, ndcg
