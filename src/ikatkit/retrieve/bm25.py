"""BM25 (+RM3) search over a Lucene index, ikatkit's own or one built by Anserini/Pyserini elsewhere (Lucene and
Anserini on our own JVM).

Pyserini's ``LuceneSearcher.search`` loads every hit's stored document, which dominates at k=1000. Our path runs the
same Anserini query (bag of words, Anserini's English analyzer) through the one Lucene top-k searcher
(:class:`ikatkit.retrieve.lucene.LuceneTopK`) on the reader Pyserini has open; text is fetched only for the passages a
later stage asks for (:attr:`Bm25Searcher.texts`). RM3, every search when no JDK compiled the Java helpers, and an
index whose ``id`` field has no doc values go through Pyserini (same ranking, slower).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from ikatkit.capabilities import Hit
from ikatkit.index.lucene import lucene_info
from ikatkit.index.manifest import BM25, wrong_kind
from ikatkit.index.texts import TextsFunction
from ikatkit.retrieve.lucene import PARALLEL_FROM, LuceneTopK, helper


class Bm25Searcher:
    """Batch BM25 search; ``rm3`` = ``{"fb_terms": 10, "fb_docs": 10, "original_query_weight": 0.5}`` enables RM3.

    ``threads`` search a batch's queries side by side, or one query alone on an index of ``parallel_from``
    documents or more in parts (the same ranking; ``threads = 1``: one thread throughout). ``bulk`` tells whether
    our Java helper serves plain BM25 (else Pyserini's ``LuceneSearcher`` does)."""

    expands_ptkb = True  # retrieve appends the PTKB statements (capabilities.expands_ptkb): BM25 matches words

    def __init__(self, index: str | Path, k1: float = 0.9, b: float = 0.4, rm3: dict[str, Any] | None = None,
                 threads: int = 2, parallel_from: int = PARALLEL_FROM) -> None:
        from ikatkit.java import autoclass, import_pyserini

        self.info = lucene_info(index)
        self.index = self.info.path
        if self.info.kind != BM25:
            raise wrong_kind(self.index, self.info.kind, BM25)
        self.pyserini = import_pyserini("pyserini.search.lucene").LuceneSearcher(str(self.index))
        self.pyserini.set_bm25(k1, b)
        self.rm3 = rm3 is not None
        if self.rm3:
            self.pyserini.set_rm3(**(rm3 or {}))
        self.threads = threads
        top_hits = helper("ikatkit.TopHits")  # the reader Pyserini has open: the index is opened once
        self.lucene = LuceneTopK(self.pyserini.object.get_similarity(), index=self.index,
                                 reader=top_hits.readerOf(self.pyserini.object) if top_hits else None,
                                 id_doc_values=self.info.id_doc_values, threads=threads, parallel_from=parallel_from)
        if top_hits is not None and not self.lucene.fast and not self.rm3:
            _say_once(f"ikatkit: {self.index}: the id field has no doc values, so BM25 search goes through "
                      "Pyserini's LuceneSearcher (same ranking, slower at large k)")
        self.bulk = self.lucene.fast and not self.rm3
        self.generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self.analyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()

    def query(self, text: str) -> Any:
        """Anserini's bag-of-words Lucene query of ``text`` (None when it has no term)."""
        return self.generator.buildQuery("contents", self.analyzer, text) if text.strip() else None

    def search(self, query: str, k: int = 1000) -> list[Hit]:
        return self.batch_search({"q": query}, k)["q"]

    def batch_search(self, queries: dict[str, str], k: int = 1000) -> dict[str, list[Hit]]:
        """``{qid: [(passage id, score), ...]}`` for ``{qid: query}``, searched on ``threads`` threads."""
        if not self.bulk:
            asked = {qid: q for qid, q in queries.items() if q.strip()}
            answered = self.pyserini.batch_search(list(asked.values()), list(asked), k, self.threads) if asked else {}
            return {qid: [(h.docid, float(h.score)) for h in answered.get(qid, [])] for qid in queries}
        return self.lucene.top_k({qid: self.query(q) for qid, q in queries.items()}, k)

    @property
    def texts(self) -> TextsFunction:
        """``texts(ids)``: stored passage texts by id (ids the index lacks are left out); one clear error, when
        asked for (a stage that needs texts asks while the pipeline is built), if the index stores none."""
        self.info.require_texts()
        return self.lucene.texts


@lru_cache(maxsize=None)
def _say_once(message: str) -> None:
    print(message, file=sys.stderr)
