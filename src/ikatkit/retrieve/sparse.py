"""Learned sparse (SPLADE) search over a Lucene impact index: ``ikatkit index sparse``'s, or one built by Anserini
elsewhere (the model then named by the resource).

Queries are encoded by the SPLADE model into quantized term weights (:mod:`ikatkit.index.splade`); the Lucene query
is the one Anserini's impact searcher builds (``BagOfWordsQueryGenerator.buildQuery(field, {term: weight})``: a
disjunction of term queries, each boosted by its weight, scored by ``ImpactSimilarity``: weight x the passage's stored
impact), built in Java from one string (``SparseQuery.java``), so a score is the sum over shared terms of query weight
x passage weight. It is searched at BM25's Java ceiling: the same top-k collector
(``TopHits.java``: ties by id, Anserini's score post-processing) on ``threads`` threads for a batch, a query alone
on a large index in parts on every thread (``ParallelSearch.java``). Without a JDK to compile those helpers, Anserini's
own ``SimpleImpactSearcher`` searches (the same ranking, slower at large k).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.index.lucene import BODY_FIELD, open_index, open_reader
from ikatkit.index.sparse import read_manifest
from ikatkit.index.texts import TextsFunction
from ikatkit.retrieve.bm25 import PARALLEL_FROM, SPARE, Hit, batch_hits, hits

Vector = Mapping[str, int]
MAX_TERMS = 32768  # terms a query may have (BERT's vocabulary: 30,522)


class SpladeSearcher:
    """Batch SPLADE search; ``model`` encodes the queries (default: the index manifest's) on ``device`` (default
    CPU); ``threads`` Java threads search a batch's queries side by side (or one query alone in parts)."""

    def __init__(self, path: str | Path, model: str | None = None, threads: int = 2, device: str | None = None,
                 parallel_from: int = PARALLEL_FROM) -> None:
        from ikatkit.java import autoclass

        self.info = open_index(path)
        self.index = self.info.path
        manifest = read_manifest(self.index)
        if self.info.own and manifest is None:
            raise IkatError("this index is not a sparse (impact) index", path=self.index,
                            fix="build one with `ikatkit index sparse PASSAGES... --out DIR`, or declare this index "
                                'as kind = "bm25"')
        self.model: str = model or (manifest or {}).get("model") or ""
        if not self.model:
            raise IkatError("an impact index built outside ikatkit names no query encoder", path=self.index,
                            fix='add model = "<the SPLADE model that encoded it>" to the resource')
        self.threads = threads
        self.device = device
        self._encoder: Any = None
        from jnius import JavaException, cast  # only once our JVM runs

        self.reader = cast("org.apache.lucene.index.IndexReader", open_reader(self.index))
        index_searcher = autoclass("org.apache.lucene.search.IndexSearcher")
        # a query has a clause a term: more than Lucene's default 1024 only from a model far denser than SPLADE's
        index_searcher.setMaxClauseCount(max(index_searcher.getMaxClauseCount(), MAX_TERMS))
        self.searcher = index_searcher(self.reader)
        self.searcher.setSimilarity(autoclass("io.anserini.search.similarity.ImpactSimilarity")())
        try:
            self.top_hits = autoclass("ikatkit.TopHits") if self.info.id_doc_values is not None else None
            self.sparse_query = autoclass("ikatkit.SparseQuery")
        except JavaException:  # no JDK compiled the helpers
            self.top_hits = None
        sort_field = autoclass("org.apache.lucene.search.SortField")
        kind = "STRING" if self.info.id_doc_values == "SORTED" else "STRING_VAL"
        self.sort = autoclass("org.apache.lucene.search.Sort")(sort_field.FIELD_SCORE, sort_field(
            "id", getattr(autoclass("org.apache.lucene.search.SortField$Type"), kind)))
        self.anserini: Any = None
        if self.top_hits is None:
            self.anserini = autoclass("io.anserini.search.SimpleImpactSearcher")(str(self.index))
        self.parallel = autoclass("ikatkit.ParallelSearch")(self.searcher, threads, 0) if (
            self.top_hits is not None and threads > 1 and self.reader.maxDoc() >= parallel_from) else None
        self._texts: TextsFunction | None = None

    @property
    def encoder(self) -> Any:
        """The query encoder (:class:`ikatkit.index.splade.SpladeEncoder`), loaded on first use."""
        if self._encoder is None:
            from ikatkit.index.splade import SpladeEncoder

            self._encoder = SpladeEncoder(self.model, self.device)  # torch's threads are the run's (the pipeline's)
        return self._encoder

    def query(self, vector: Vector) -> Any:
        """Anserini's Lucene query of a quantized query vector (None when it is empty), built in Java from one
        string (``SparseQuery.java``)."""
        if not vector:
            return None
        return self.sparse_query.build(BODY_FIELD, "\n".join(f"{term} {weight}" for term, weight in vector.items()))

    def search(self, query: str, k: int = 1000) -> list[Hit]:
        return self.batch_search({"q": query}, k)["q"]

    def batch_search(self, queries: dict[str, str], k: int = 1000) -> dict[str, list[Hit]]:
        """``{qid: [(passage id, score), ...]}`` for ``{qid: query}``; an empty query finds nothing."""
        live = [qid for qid, text in queries.items() if text.strip()]
        vectors = dict(zip(live, self.encoder.encode_queries([queries[qid] for qid in live]))) if live else {}
        found = self.search_vectors(vectors, k)
        return {qid: found.get(qid, []) for qid in queries}

    def search_vectors(self, vectors: Mapping[str, Vector], k: int = 1000) -> dict[str, list[Hit]]:
        """The rankings of already encoded query vectors ``{qid: {term: weight}}``."""
        if self.anserini is not None:
            return {qid: self._by_anserini(vector, k) for qid, vector in vectors.items()}
        built = {qid: self.query(vector) for qid, vector in vectors.items()}
        live = [qid for qid, query in built.items() if query is not None]
        if len(live) == 1 and self.parallel is not None:  # a query alone: searched in parts on every thread
            return {qid: hits(self.parallel.search(built[qid], k, SPARE, self.sort, "id")) if qid in live else []
                    for qid in vectors}
        ranked = dict(zip(live, batch_hits(self.top_hits, self.searcher, [built[qid] for qid in live], k, self.sort,
                                           self.threads)))
        return {qid: ranked.get(qid, []) for qid in vectors}

    def _by_anserini(self, vector: Vector, k: int) -> list[Hit]:
        if not vector:
            return []
        from ikatkit.java import autoclass

        weights, integer = autoclass("java.util.HashMap")(), autoclass("java.lang.Integer")
        for term, weight in vector.items():
            weights.put(term, integer(int(weight)))
        return [(hit.docid, float(hit.score)) for hit in self.anserini.search(weights, k)]

    @property
    def texts(self) -> TextsFunction:
        """``texts(ids)``: the passages' texts stored in the index (ids it lacks are left out)."""
        if self._texts is None:
            from ikatkit.index.texts import LuceneTexts

            self.info.require_texts()
            self._texts = LuceneTexts(self.index).texts
        return self._texts

