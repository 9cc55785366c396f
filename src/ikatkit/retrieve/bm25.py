"""BM25 (+RM3) search over a Lucene index built by ``ikatkit index build`` (Lucene and Anserini on our own JVM).

Pyserini's ``LuceneSearcher.search`` loads every hit's stored document, which dominates at k=1000. Our
path runs the same Anserini query (bag of words, Anserini's English analyzer) on a Lucene
``IndexSearcher`` (score-only top k, which Lucene prunes, then ties ordered by id as Anserini's sort does), applies Anserini's score post-processing (scores
rounded to 1e-4, ties lowered by 1e-6 per tied rank, in float32, see :func:`adjust_ties`) and maps Lucene
doc numbers to passage ids through a table kept beside the index (``docids.npy``, memory-mapped, built on
first use). Text is fetched only for the passages a later stage asks for (:meth:`Bm25Searcher.texts`).
RM3 runs through Pyserini.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.index.lookup import check_index

ID_TABLE = "docids.npy"
SPARE = 16  # extra hits fetched so that score ties at rank k are seen whole


@dataclass(frozen=True)
class Hit:
    docid: str
    score: float


def id_table(index: Path, reader: Any, stored: Any) -> np.ndarray:
    """Passage id of every Lucene doc number, cached as a memory-mapped file in the index folder."""
    path = index / ID_TABLE
    if not path.exists():
        from ikatkit.atomic import atomic_open

        ids = np.array([stored.document(i).get("id") for i in range(reader.maxDoc())], dtype=np.str_)
        with atomic_open(path, "wb") as handle:
            np.save(handle, ids)
    return np.load(path, mmap_mode="r")


def adjust_ties(scores: Sequence[float]) -> list[float]:
    """Lucene scores as Anserini reports them: each rounded to 4 decimals (in double precision, stored as float32); a score within 1e-4 of
    the (already adjusted) score above it is a tie and is lowered by 1e-6 times its position in the tie run."""
    steps = np.floor(np.asarray(scores, dtype=np.float64) * 1e4 + 0.5)  # Math.round in double precision
    rounded = (steps / 1e4).astype(np.float32)
    gaps = (rounded[:-1] - rounded[1:]).tolist()  # float32 differences of the unadjusted neighbours
    out = rounded.copy()
    step, margin, dup = np.float32(1e-6), np.float32(1e-4), 0
    for i, gap in enumerate(gaps, start=1):
        if dup == 0 and gap > 2e-4:  # clearly apart: no float32 work needed
            continue
        if out[i - 1] - out[i] > margin:
            dup = 0
        else:
            dup += 1
            out[i] = out[i] - step * np.float32(dup)
    return out.tolist()


class Bm25Searcher:
    """Batch BM25 search; ``rm3`` = ``{"fb_terms": 10, "fb_docs": 10, "original_query_weight": 0.5}`` enables RM3."""

    def __init__(self, index: str | Path, k1: float = 0.9, b: float = 0.4, rm3: dict[str, Any] | None = None,
                 threads: int = 2) -> None:
        from ikatkit.java import autoclass, import_pyserini

        self.index = check_index(index)
        self.pyserini = import_pyserini("pyserini.search.lucene").LuceneSearcher(str(self.index))
        from jnius import cast  # only once our JVM runs: importing jnius first would start a bare one
        self.pyserini.set_bm25(k1, b)
        self.rm3 = rm3 is not None
        if self.rm3:
            self.pyserini.set_rm3(**(rm3 or {}))
        self.threads = threads
        reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
            autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.io.File")(str(self.index)).toPath()))
        self.searcher = autoclass("org.apache.lucene.search.IndexSearcher")(
            cast("org.apache.lucene.index.IndexReader", reader))
        self.searcher.setSimilarity(self.pyserini.object.get_similarity())
        self.generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self.analyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
        sort_field = autoclass("org.apache.lucene.search.SortField")
        self.sort = autoclass("org.apache.lucene.search.Sort")(
            sort_field.FIELD_SCORE, sort_field("id", autoclass("org.apache.lucene.search.SortField$Type").STRING_VAL))
        self.ids = id_table(self.index, reader, self.searcher.storedFields())
        self._texts: dict[str, str] = {}

    def search(self, query: str, k: int = 1000) -> list[Hit]:
        if not query.strip():
            return []
        if self.rm3:
            return [Hit(h.docid, float(h.score)) for h in self.pyserini.search(query, k)]
        lucene_query = self.generator.buildQuery("contents", self.analyzer, query)
        if lucene_query is None:
            return []
        ranked = self._top(lucene_query, k)
        scores = adjust_ties([score for score, _ in ranked])
        return [Hit(pid, score) for (_, pid), score in zip(ranked, scores)]

    def _top(self, lucene_query: Any, k: int) -> list[tuple[float, str]]:
        """Top ``k`` as ``(score, id)`` by score, ties by id: Lucene's fast score-only top ``k + SPARE``, re-sorted
        here; only when the last of those still ties the ``k``-th score is the slower sorted search needed."""
        hits = [(hit.score, hit.doc) for hit in self.searcher.search(lucene_query, k + SPARE).scoreDocs]
        if len(hits) == k + SPARE and hits[-1][0] == hits[k - 1][0]:
            hits = [(hit.score, hit.doc) for hit in self.searcher.search(lucene_query, k, self.sort, True).scoreDocs]
        ranked = sorted(((score, str(self.ids[doc])) for score, doc in hits), key=lambda h: (-h[0], h[1]))
        return ranked[:k]

    def batch_search(self, queries: dict[str, str], k: int = 1000) -> dict[str, list[Hit]]:
        """``{qid: [Hit, ...]}`` for ``{qid: query}``."""
        if self.rm3:
            live = {qid: q for qid, q in queries.items() if q.strip()}
            found = self.pyserini.batch_search(list(live.values()), list(live), k, self.threads) if live else {}
            return {qid: [Hit(h.docid, float(h.score)) for h in found.get(qid, [])] for qid in queries}
        return {qid: self.search(query, k) for qid, query in queries.items()}

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Stored passage texts (``contents``) by id; ids the index lacks are left out."""
        for pid in ids:
            if pid not in self._texts:
                stored = self.pyserini.doc(pid)
                if stored is not None:
                    self._texts[pid] = json.loads(stored.raw())["contents"]
        return {pid: self._texts[pid] for pid in ids if pid in self._texts}
