"""BM25 (+RM3) search over a Lucene index built by ``ikatkit index build`` (Pyserini on our own JVM)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ikatkit.index.lookup import check_index


@dataclass(frozen=True)
class Hit:
    docid: str
    score: float


class Bm25Searcher:
    """Batch BM25 search; ``rm3`` = ``{"fb_terms": 10, "fb_docs": 10, "original_query_weight": 0.5}`` enables RM3."""

    def __init__(self, index: str | Path, k1: float = 0.9, b: float = 0.4, rm3: dict[str, Any] | None = None,
                 threads: int = 2) -> None:
        from ikatkit.java import import_pyserini

        self.index = check_index(index)
        self.searcher = import_pyserini("pyserini.search.lucene").LuceneSearcher(str(self.index))
        self.searcher.set_bm25(k1, b)
        if rm3 is not None:
            self.searcher.set_rm3(**rm3)
        self.threads = threads
        self._texts: dict[str, str] = {}

    def search(self, query: str, k: int = 1000) -> list[Hit]:
        if not query.strip():
            return []
        return [Hit(h.docid, float(h.score)) for h in self.searcher.search(query, k)]

    def batch_search(self, queries: dict[str, str], k: int = 1000) -> dict[str, list[Hit]]:
        """``{qid: [Hit, ...]}`` for ``{qid: query}``, searched in parallel Java threads."""
        live = {qid: q for qid, q in queries.items() if q.strip()}
        found = self.searcher.batch_search(list(live.values()), list(live), k, self.threads) if live else {}
        return {qid: [Hit(h.docid, float(h.score)) for h in found.get(qid, [])] for qid in queries}

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Stored passage texts (``contents``) by id; ids the index lacks are left out."""
        for pid in ids:
            if pid not in self._texts:
                stored = self.searcher.doc(pid)
                if stored is not None:
                    self._texts[pid] = json.loads(stored.raw())["contents"]
        return {pid: self._texts[pid] for pid in ids if pid in self._texts}
