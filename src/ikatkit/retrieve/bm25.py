"""BM25 (+RM3) search over a Lucene index, ikatkit's own or one built by Anserini/Pyserini elsewhere (Lucene and
Anserini on our own JVM).

Pyserini's ``LuceneSearcher.search`` loads every hit's stored document, which dominates at k=1000. Our
path runs the same Anserini query (bag of words, Anserini's English analyzer) on a Lucene
``IndexSearcher`` through a small Java helper (``TopHits.java``, compiled once when a JDK is found):
score-only top k, ties ordered by id as Anserini's sort does, ids read from the ``id`` doc values (binary as
Anserini writes them, or sorted as older versions did), the
whole ranking handed to Python as two arrays, with Anserini's score post-processing (scores rounded to
1e-4, ties lowered by 1e-6 per tied rank, in float32). Text is fetched
only for the passages a later stage asks for (:attr:`Bm25Searcher.texts`, from :mod:`ikatkit.index.texts`). A query
searched alone on a large index is scored in parts on every thread (``ParallelSearch.java``, :data:`PARALLEL_FROM`),
the same ranking; a batch runs its queries side by side instead (``TopHits.submit``). RM3,
every search when no JDK compiled the helper, and an index whose ``id`` field has no doc values go through
Pyserini (same ranking, slower).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.index.lucene import open_index
from ikatkit.index.texts import TextsFunction

SPARE = 16  # extra hits fetched so that score ties at rank k are seen whole
PARALLEL_FROM = 200_000
"""Documents from which a query searched alone (``search``, a batch of one) is scored on ``threads`` threads
(``ParallelSearch.java``: doc-id ranges of the segments, the same ranking); below, one thread. At 200k realistic
passages, k=1000, two threads are 1.2x faster than one at 26-33% more CPU (``bench/bench_parallel.py``,
docs/benchmarks.md); on smaller indexes the fixed costs of a query (a task handed to the pool, a scorer per part,
the merge) weigh more."""


Hit = tuple[str, float]
"""A ranked passage: (passage id, score). A plain tuple: a NamedTuple costs four times the CPU to make, and the
garbage collector keeps tracking it (a batch of them set off full collections of the whole heap, JVM bridge and
Pyserini included); 1,000 of them a query were the last 5-20% between a k=1000 search and Java alone
(docs/benchmarks.md)."""


class Bm25Searcher:
    """Batch BM25 search; ``rm3`` = ``{"fb_terms": 10, "fb_docs": 10, "original_query_weight": 0.5}`` enables RM3.

    ``threads`` search a batch's queries side by side, or one query alone on an index of ``parallel_from``
    documents or more in parts (``parallel``: the same ranking; ``threads = 1``: one thread throughout). ``bulk``
    tells whether our Java helper serves plain BM25 (else Pyserini's ``LuceneSearcher`` does)."""

    def __init__(self, index: str | Path, k1: float = 0.9, b: float = 0.4, rm3: dict[str, Any] | None = None,
                 threads: int = 2, parallel_from: int = PARALLEL_FROM) -> None:
        from ikatkit.java import autoclass, import_pyserini

        self.info = open_index(index)
        self.index = self.info.path
        if (self.info.manifest or {}).get("kind") == "sparse":
            raise IkatError("this is a SPLADE impact index: BM25 would score its term weights as words",
                            path=self.index, fix='search it with a resource of kind = "splade" (path = this folder)')
        self.pyserini = import_pyserini("pyserini.search.lucene").LuceneSearcher(str(self.index))
        from jnius import JavaException, cast  # only once our JVM runs: importing jnius first would start a bare one

        self.pyserini.set_bm25(k1, b)
        self.rm3 = rm3 is not None
        if self.rm3:
            self.pyserini.set_rm3(**(rm3 or {}))
        self.threads = threads
        try:
            self.top_hits = autoclass("ikatkit.TopHits")
        except JavaException:  # no JDK compiled the helper
            self.top_hits = None
        self.bulk = self.top_hits is not None and not self.rm3
        if self.bulk and self.info.id_doc_values is None:
            _say_once(f"ikatkit: {self.index}: the id field has no doc values, so BM25 search goes through "
                      "Pyserini's LuceneSearcher (same ranking, slower at large k)")
            self.bulk = False
        if self.bulk:  # on the reader Pyserini has open: the index is opened once
            self.searcher = autoclass("org.apache.lucene.search.IndexSearcher")(
                cast("org.apache.lucene.index.IndexReader", self.top_hits.readerOf(self.pyserini.object)))
            self.searcher.setSimilarity(self.pyserini.object.get_similarity())
            self.generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
            self.analyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
            sort_field = autoclass("org.apache.lucene.search.SortField")
            kind = "STRING" if self.info.id_doc_values == "SORTED" else "STRING_VAL"
            self.sort = autoclass("org.apache.lucene.search.Sort")(sort_field.FIELD_SCORE, sort_field(
                "id", getattr(autoclass("org.apache.lucene.search.SortField$Type"), kind)))
        self.parallel = self.parallel_search() if self.bulk and threads > 1 and \
            self.searcher.getIndexReader().maxDoc() >= parallel_from else None
        self._texts: Any = None

    def parallel_search(self, part_docs: int = 0) -> Any:
        """A ``ParallelSearch`` on ``threads`` threads over this searcher's index, cut into parts of ``part_docs``
        documents (0: four parts a thread)."""
        from ikatkit.java import autoclass

        return autoclass("ikatkit.ParallelSearch")(self.searcher, self.threads, part_docs)

    def search(self, query: str, k: int = 1000) -> list[Hit]:
        if not query.strip():
            return []
        if not self.bulk:
            return [(h.docid, float(h.score)) for h in self.pyserini.search(query, k)]
        lucene_query = self.generator.buildQuery("contents", self.analyzer, query)
        if lucene_query is None:
            return []
        return self._alone(lucene_query, k)

    def _alone(self, lucene_query: Any, k: int) -> list[Hit]:
        """One query's ranking: in parts on every thread where ``parallel`` is set, else on this thread."""
        if self.parallel is not None:
            return hits(self.parallel.search(lucene_query, k, SPARE, self.sort, "id"))
        return hits(self.top_hits.search(self.searcher, lucene_query, k, SPARE, self.sort, "id"))

    def batch_search(self, queries: dict[str, str], k: int = 1000) -> dict[str, list[Hit]]:
        """``{qid: [(passage id, score), ...]}`` for ``{qid: query}``, searched on ``threads`` threads."""
        if not self.bulk:
            asked = {qid: q for qid, q in queries.items() if q.strip()}
            answered = self.pyserini.batch_search(list(asked.values()), list(asked), k, self.threads) if asked else {}
            return {qid: [(h.docid, float(h.score)) for h in answered.get(qid, [])] for qid in queries}
        built = {qid: self.generator.buildQuery("contents", self.analyzer, q) if q.strip() else None
                 for qid, q in queries.items()}
        live = [qid for qid, query in built.items() if query is not None]
        if len(live) == 1 and self.parallel is not None:  # a query alone: searched in parts on every thread
            return {qid: self._alone(built[qid], k) if qid in live else [] for qid in queries}
        found = dict(zip(live, batch_hits(self.top_hits, self.searcher, [built[qid] for qid in live], k, self.sort,
                                          self.threads)))
        return {qid: found.get(qid, []) for qid in queries}

    @property
    def texts(self) -> TextsFunction:
        """``texts(ids)``: stored passage texts by id (ids the index lacks are left out); one clear error, when
        asked for (a stage that needs texts asks while the pipeline is built), if the index stores none."""
        if self._texts is None:
            from jnius import cast

            from ikatkit.index.texts import LuceneTexts
            from ikatkit.java import autoclass

            self.info.require_texts()
            shared = self.top_hits is not None  # the reader Pyserini has open (else LuceneTexts opens one)
            reader = cast("org.apache.lucene.index.IndexReader",
                          autoclass("ikatkit.TopHits").readerOf(self.pyserini.object)) if shared else None
            self._texts = LuceneTexts(self.index, reader=reader).texts
        return self._texts


def hits(top: Any) -> list[Hit]:
    """A ``TopHits`` ranking as (id, score) pairs: the ids cross from Java as one string (a String per hit costs
    more than the search at k=1000), the pairs are zipped in C."""
    scores = top.scores
    ids = top.joinedIds.split("\n") if len(scores) else []
    return list(zip(ids if len(ids) == len(scores) else top.ids, scores))  # an id with a newline: one by one


def batch_hits(top_hits: Any, searcher: Any, queries: list[Any], k: int, sort: Any, threads: int) -> list[list[Hit]]:
    """The rankings of Lucene ``queries`` searched by ``TopHits`` on ``threads`` Java threads, each read into pairs
    while the later ones are still searched (reading them after the whole batch left a core idle: 0.83 of the
    batch in Java alone at 50k passages, k=1000, docs/benchmarks.md)."""
    if not queries:
        return []
    batch = top_hits.submit(searcher, queries, k, SPARE, sort, "id", threads)
    try:
        return [hits(batch.get(i)) for i in range(len(queries))]
    finally:
        batch.cancel()  # none left, or a stop (Ctrl-C) while reading: the searches not started are dropped


@lru_cache(maxsize=None)
def _say_once(message: str) -> None:
    print(message, file=sys.stderr)
