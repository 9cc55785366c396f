"""Learned sparse (SPLADE) search over a Lucene impact index: ``ikatkit index sparse``'s, or one built by Anserini
elsewhere (the model then named by the resource).

Queries are encoded by the SPLADE model into quantized term weights (:mod:`ikatkit.index.sparse_encoder`, the query
encoder injected as Pyserini's ``LuceneImpactSearcher(index, query_encoder)`` takes it, or built from the index's
manifest); the Lucene query is the one Anserini's impact searcher builds
(``BagOfWordsQueryGenerator.buildQuery(field, {term: weight})``: a disjunction of term queries, each boosted by its
weight, scored by ``ImpactSimilarity``: weight x the passage's stored impact), built in Java from one string
(``SparseQuery.java``), so a score is the sum over shared terms of query weight x passage weight. It is searched by
the one Lucene top-k searcher (:class:`ikatkit.retrieve.lucene.LuceneTopK`); without a JDK to compile its helpers,
Anserini's own ``SimpleImpactSearcher`` searches (the same ranking, slower at large k).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ikatkit.capabilities import Hit
from ikatkit.errors import IkatError
from ikatkit.index.lucene import BODY_FIELD, lucene_info
from ikatkit.index.manifest import SPARSE, wrong_kind
from ikatkit.index.sparse_encoder import QUERY_LENGTH
from ikatkit.index.texts import TextsFunction
from ikatkit.retrieve.lucene import PARALLEL_FROM, LuceneTopK, helper

Vector = Mapping[str, int]
MAX_TERMS = 32768  # terms a query may have (BERT's vocabulary: 30,522)


class SparseSearcher:
    """Batch SPLADE search; ``query_encoder`` (a :class:`ikatkit.index.sparse_encoder.SparseEncoder`) encodes the
    queries, else ``model`` on ``device`` (default: the index manifest's model, on the CPU), loaded on first use; a
    model other than the manifest's is refused unless ``other_model`` (its vocabulary must be the index's in any
    case); ``threads`` Java threads search a batch's queries side by side (or one query alone in parts)."""

    expands_ptkb = False  # retrieve searches the query alone (capabilities.expands_ptkb), as the SPLADE baseline

    def __init__(self, path: str | Path, model: str | None = None, threads: int = 2, device: str | None = None,
                 parallel_from: int = PARALLEL_FROM, query_encoder: Any = None, other_model: bool = False) -> None:
        from ikatkit.java import autoclass

        self.info = lucene_info(path)
        self.index = self.info.path
        manifest = self.info.manifest or {}
        if self.info.own and self.info.kind != SPARSE:
            raise wrong_kind(self.index, self.info.kind, SPARSE)
        self.manifest = manifest
        named = manifest.get("model")
        self.model: str = (query_encoder.name if query_encoder is not None else model) or named or ""
        if not self.model:
            raise IkatError("an impact index built outside ikatkit names no query encoder", path=self.index,
                            fix='add model = "<the SPLADE model that encoded it>" to the resource (--sparse-model)')
        if named and self.model != named and not other_model:
            raise IkatError(f"the index was encoded by {named!r}, not by the query model {self.model!r}",
                            path=self.index, fix=f"leave the model out (the index's {named!r} encodes the queries), "
                                                 "or ask for another with other_model = true (--allow-other-model)")
        self.threads = threads
        self.device = device
        self._encoder: Any = query_encoder
        if query_encoder is not None:
            self._check_vocabulary(query_encoder)
        index_searcher = autoclass("org.apache.lucene.search.IndexSearcher")
        # a query has a clause a term: more than Lucene's default 1024 only from a model far denser than SPLADE's
        index_searcher.setMaxClauseCount(max(index_searcher.getMaxClauseCount(), MAX_TERMS))
        self.lucene = LuceneTopK(autoclass("io.anserini.search.similarity.ImpactSimilarity")(), index=self.index,
                                 id_doc_values=self.info.id_doc_values, threads=threads, parallel_from=parallel_from)
        self.sparse_query = helper("ikatkit.SparseQuery")
        self.anserini: Any = None
        if not self.lucene.fast:
            self.anserini = autoclass("io.anserini.search.SimpleImpactSearcher")(str(self.index))

    @property
    def stats(self) -> dict[str, Any]:
        """What searched (a run's manifest keeps it under ``resource_stats``): the index, the query model (named, not
        loaded) and the length its queries are cut at."""
        return {"index": str(self.index), "query_model": self.model, "query_max_length": QUERY_LENGTH}

    @property
    def encoder(self) -> Any:
        """The query encoder (:class:`ikatkit.index.sparse_encoder.SparseEncoder`), loaded on first use."""
        if self._encoder is None:
            from ikatkit.index.sparse_encoder import SparseEncoder

            self._encoder = self._check_vocabulary(SparseEncoder(self.model, self.device))
        return self._encoder

    def _check_vocabulary(self, encoder: Any) -> Any:
        vocabulary = self.manifest.get("vocabulary")
        if vocabulary is not None and len(encoder.terms) != vocabulary:
            raise IkatError(f"the query model {encoder.name!r} has a vocabulary of {len(encoder.terms)} terms, the "
                            f"index's {vocabulary}", path=self.index,
                            fix="encode the queries with the index's model (leave the model out)")
        return encoder

    def query(self, vector: Vector) -> Any:
        """Anserini's Lucene query of a quantized query vector (None when it is empty), built in Java from one
        string (``SparseQuery.java``)."""
        if not vector:
            return None
        assert self.sparse_query is not None  # the helpers compiled (else Anserini searches: _by_anserini)
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
        return self.lucene.top_k({qid: self.query(vector) for qid, vector in vectors.items()}, k)

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
        self.info.require_texts()
        return self.lucene.texts
