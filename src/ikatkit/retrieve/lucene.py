"""The one Lucene top-k searcher: BM25, learned sparse (impact) and partitioned search differ only in how they build a
Lucene query and which similarity scores it.

A Lucene ``IndexSearcher`` over one reader (a folder's, Pyserini's, or a MultiReader of partitions) with our Java
helper's collector (``TopHits.java``: score-only top k, ties ordered by id as Anserini's sort does, ids read from the
``id`` doc values — binary as Anserini writes them, or sorted as older versions did — the ranking handed to Python as
two arrays, with Anserini's score post-processing); a batch's queries searched side by side on ``threads`` Java
threads, a query alone on an index of :data:`PARALLEL_FROM` documents or more in parts on every thread
(``ParallelSearch.java``: doc-id ranges of the segments, the same ranking). Whether that path is open (:attr:`fast`:
a JDK compiled the helpers and the ``id`` field has doc values) is decided here once; a searcher without it falls back
to Anserini's or Pyserini's own search (the same ranking, slower at large k). Passage texts come from the same reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ikatkit.capabilities import Hit
from ikatkit.index.texts import TextsFunction

SPARE = 16  # extra hits fetched so that score ties at rank k are seen whole
PARALLEL_FROM = 200_000
"""Documents from which a query searched alone (``search``, a batch of one) is scored on ``threads`` threads
(``ParallelSearch.java``: doc-id ranges of the segments, the same ranking); below, one thread. At 200k realistic
passages, k=1000, two threads are 1.2x faster than one at 26-33% more CPU (``bench/bench_parallel.py``,
docs/benchmarks.md); on smaller indexes the fixed costs of a query (a task handed to the pool, a scorer per part,
the merge) weigh more."""


def helper(name: str) -> Any | None:
    """Our compiled Java helper class ``name`` (``ikatkit.TopHits``...), or None when no JDK compiled the helpers."""
    from ikatkit.java import autoclass, start_jvm

    start_jvm()
    from jnius import JavaException  # only once our JVM runs: importing jnius first would start a bare one

    try:
        return autoclass(name)
    except JavaException:
        return None


class LuceneTopK:
    """Top-k search of Lucene queries over ``reader`` (or the index folder ``index``'s own), scored by
    ``similarity``; ``id_doc_values``: the ``id`` field's doc values (``BINARY``, ``SORTED`` or None: no fast
    path); ``threads`` Java threads; ``parallel_from``: documents from which a query alone is searched in parts."""

    def __init__(self, similarity: Any, *, index: str | Path | None = None, reader: Any = None,
                 id_doc_values: str | None = "BINARY", threads: int = 2, parallel_from: int = PARALLEL_FROM) -> None:
        from ikatkit.index.lucene import open_reader
        from ikatkit.java import autoclass

        self.top_hits = helper("ikatkit.TopHits") if id_doc_values is not None else None
        from jnius import cast  # only once our JVM runs (helper started it)

        if reader is None:
            assert index is not None, "LuceneTopK needs an index folder or an open reader"
            reader = open_reader(index)
        self.reader = cast("org.apache.lucene.index.IndexReader", reader)
        self.searcher = autoclass("org.apache.lucene.search.IndexSearcher")(self.reader)
        self.searcher.setSimilarity(similarity)
        self.threads = threads
        sort_field = autoclass("org.apache.lucene.search.SortField")
        kind = "STRING" if id_doc_values == "SORTED" else "STRING_VAL"
        self.sort = autoclass("org.apache.lucene.search.Sort")(sort_field.FIELD_SCORE, sort_field(
            "id", getattr(autoclass("org.apache.lucene.search.SortField$Type"), kind)))
        self.parallel = self.parallel_search() if (
            self.fast and threads > 1 and self.reader.maxDoc() >= parallel_from) else None
        self._texts: TextsFunction | None = None

    @property
    def fast(self) -> bool:
        """Whether our collector serves this index (else the caller's library search does)."""
        return self.top_hits is not None

    def parallel_search(self, part_docs: int = 0) -> Any:
        """A ``ParallelSearch`` on ``threads`` threads over this index, cut into parts of ``part_docs`` documents
        (0: four parts a thread)."""
        from ikatkit.java import autoclass

        return autoclass("ikatkit.ParallelSearch")(self.searcher, self.threads, part_docs)

    def alone(self, query: Any, k: int) -> list[Hit]:
        """One Lucene query's ranking: in parts on every thread where ``parallel`` is set, else on this thread."""
        assert self.top_hits is not None  # callers search through their library when not fast
        if self.parallel is not None:
            return hits(self.parallel.search(query, k, SPARE, self.sort, "id"))
        return hits(self.top_hits.search(self.searcher, query, k, SPARE, self.sort, "id"))

    def top_k(self, queries: Mapping[str, Any], k: int) -> dict[str, list[Hit]]:
        """``{qid: ranking}`` of ``{qid: Lucene query or None}`` (None finds nothing): a query alone in parts on every
        thread, a batch side by side on ``threads`` threads."""
        live = [qid for qid, query in queries.items() if query is not None]
        if len(live) == 1 and self.parallel is not None:
            return {qid: self.alone(queries[qid], k) if qid in live else [] for qid in queries}
        found = dict(zip(live, batch_hits(self.top_hits, self.searcher, [queries[qid] for qid in live], k, self.sort,
                                          self.threads)))
        return {qid: found.get(qid, []) for qid in queries}

    @property
    def texts(self) -> TextsFunction:
        """``texts(ids)``: the passages' texts stored in the index, read through the same reader (ids it lacks are
        left out)."""
        if self._texts is None:
            from ikatkit.index.texts import LuceneTexts

            self._texts = LuceneTexts(reader=self.reader).texts
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
