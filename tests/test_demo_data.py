"""The embedded demo data: it parses, its ids exist after segmentation, and the demo index finds them."""

from __future__ import annotations

import json

from ikatkit.collection.readers import ReadStats, read_passages
from ikatkit.evaluate.qrels import load_qrels
from ikatkit.pipelines.demo import demo_data
from ikatkit.topics import load_topics


def test_demo_collection_topics_and_qrels_agree():
    data = demo_data()
    stats = ReadStats()
    passages = {p.id: p.contents for p in read_passages(data / "clueweb22" / "en0000-00.json", "auto", stats)}
    assert (stats.documents, stats.passages, stats.skipped) == (60, 198, 0)
    topics = load_topics(data / "topics.json")
    assert topics.year == 2023 and [c.id for c in topics.conversations] == ["demo-1", "demo-2"] and len(topics) == 11
    for turn in topics:
        assert turn.response_provenance and set(turn.response_provenance) <= set(passages)
        assert set(turn.ptkb_provenance) <= set(topics.conversation_of(turn.qid).ptkb)
    qrels = load_qrels(data / "qrels.txt")
    assert set(qrels) == set(topics.qids)
    assert {pid for docs in qrels.values() for pid in docs} <= set(passages)
    ptkb = load_qrels(data / "ptkb_qrels.txt")
    assert sum(g for docs in ptkb.values() for g in docs.values()) == sum(len(t.ptkb_provenance) for t in topics)
    records = [json.loads(line) for line in (data / "clueweb22" / "en0000-00.json").read_text().splitlines()]
    assert [r["ClueWeb22-ID"] for r in records] == [f"clueweb22-en0000-00-{i:05d}" for i in range(60)]
