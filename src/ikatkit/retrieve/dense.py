"""Dense search over an index of ``ikatkit index dense``: queries embedded by the index's model, top k from faiss.

The same interface as :class:`ikatkit.retrieve.bm25.Bm25Searcher` (``batch_search``, ``search``, ``texts``), so
the ``retrieve`` stage takes either. Passage texts come from the Lucene index the dense index was encoded from (or
``index``) when it stores them, else from the dense index's own text shards (:func:`ikatkit.index.dense.stored_texts`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.index.dense import stored_texts
from ikatkit.index.job import text_shards
from ikatkit.index.manifest import DENSE, read_manifest
from ikatkit.capabilities import Hit


def check_dense_index(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The folder and manifest of a finished dense index, or one clear error."""
    path = Path(path)
    manifest = read_manifest(path) or {}
    if manifest.get("kind") != DENSE or not (path / "index.faiss").exists():
        raise IkatError("no finished dense index here (manifest.json of kind dense and index.faiss)", path=path,
                        fix="build it with `ikatkit index dense INDEX_OR_COLLECTION --out DIR`")
    return path, manifest


class DenseSearcher:
    """Top-k inner product (cosine) search; ``nprobe`` (IVF) and ``ef_search`` (HNSW) trade speed for recall;
    queries are embedded by the index's model (or ``query_encoder``) on PyTorch, faiss and PyTorch on ``threads``
    threads; ``index``: the Lucene index whose stored texts are the passages' (default: the one it was encoded
    from, else its own text shards)."""

    expands_ptkb = False  # retrieve searches the query alone (capabilities.expands_ptkb): a short-query encoder

    def __init__(self, path: str | Path, index: str | Path | None = None, nprobe: int = 32, ef_search: int = 128,
                 threads: int | None = None, query_encoder: Any = None) -> None:
        import faiss
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ikatkit.index.encode import DenseEncoder

        self.path, self.manifest = check_dense_index(path)
        self.faiss = faiss.read_index(str(self.path / "index.faiss"))
        parameters = faiss.ParameterSpace()
        if "IVF" in self.manifest["faiss"]:
            parameters.set_index_parameter(self.faiss, "nprobe", nprobe)
        if "HNSW" in self.manifest["faiss"]:
            parameters.set_index_parameter(self.faiss, "efSearch", ef_search)
        if threads:
            faiss.omp_set_num_threads(threads)
        shards = text_shards(self.path / "texts")
        self.ids = pa.chunked_array([pq.read_table(s, columns=["id"]).column("id") for s in shards]).combine_chunks()
        if len(self.ids) != self.faiss.ntotal:
            raise IkatError(f"{len(self.ids)} ids for {self.faiss.ntotal} vectors", path=self.path,
                            fix="rebuild the dense index")
        self.encoder = query_encoder or DenseEncoder(self.manifest["model"], "torch", threads=threads)
        self.texts = stored_texts(self.path, self.manifest, index)

    def search(self, query: str, k: int = 1000) -> list[Hit]:
        return self.batch_search({"q": query}, k)["q"]

    def batch_search(self, queries: dict[str, str], k: int = 1000) -> dict[str, list[Hit]]:
        """``{qid: [(passage id, score), ...]}`` for ``{qid: query}``; an empty query finds nothing."""
        live = [qid for qid, q in queries.items() if q.strip()]
        found: dict[str, list[Hit]] = {}
        if live:
            scores, rows = self.faiss.search(self.encoder.encode([queries[q] for q in live]), min(k, self.faiss.ntotal))
            for qid, row_scores, row_ids in zip(live, scores, rows):
                kept = row_ids >= 0
                ids = self.ids.take(row_ids[kept]).to_pylist()
                found[qid] = list(zip(ids, row_scores[kept].tolist()))
        return {qid: found.get(qid, []) for qid in queries}
