"""Our BM25 path against Pyserini's LuceneSearcher on the real-passage index: the same ranking."""

from __future__ import annotations

import numpy as np
import pytest

from ikatkit.retrieve.bm25 import Bm25Searcher, adjust_ties
from ikatkit.topics import load_topics


def test_same_ranking_as_lucene_searcher(passages_index, ikat2023):
    searcher = Bm25Searcher(passages_index)
    queries = load_topics(ikat2023 / "test_topics.json").queries("manual")
    ours = searcher.batch_search(queries, 1000)
    total = 0
    for qid, query in queries.items():
        reference = searcher.pyserini.search(query, 1000)
        assert [h.docid for h in ours[qid]] == [h.docid for h in reference], qid
        assert [h.score for h in ours[qid]] == pytest.approx([h.score for h in reference], abs=1e-5, rel=0)
        total += len(reference)
    assert total > 100_000
    assert searcher.search("   ", 10) == [] and searcher.search("the of and", 10) == []


def test_adjust_ties_like_anserini():
    """Rounded to 1e-4; each further tie 1e-6 lower (float32), a tie run ends at a gap over 1e-4."""
    assert adjust_ties([]) == []
    got = adjust_ties([23.439316, 22.087432, 22.087432, 22.087410, 21.602508])
    want = np.array([23.4393, 22.0874, 22.0874 - 1e-6, 22.0874 - 2e-6, 21.6025], dtype=np.float32).tolist()
    assert got == pytest.approx(want, abs=1e-7)


def test_rm3_and_texts(passages_index):
    plain, rm3 = Bm25Searcher(passages_index), Bm25Searcher(passages_index, rm3={"fb_terms": 10, "fb_docs": 5})
    query = "vegetarian diet without soy"
    assert plain.search(query, 50) != rm3.search(query, 50)
    top = plain.search(query, 3)
    texts = plain.texts([top[0].docid, "clueweb22-en9999-99-99999:0"])
    assert list(texts) == [top[0].docid] and texts[top[0].docid]
