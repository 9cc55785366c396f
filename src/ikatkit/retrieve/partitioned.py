"""BM25 search over partitioned indexes: all, several or one partition, one Lucene searcher per choice.

A choice of partitions is searched as one index: a Lucene ``IndexSearcher`` over a ``MultiReader`` of those
partitions' readers, so term and collection statistics are those of their union. Over all partitions that is
the unpartitioned index: the same Anserini query (bag of words, Anserini's English analyzer), Lucene's
``BM25Similarity`` as Anserini sets it, and the one Lucene top-k searcher (:class:`ikatkit.retrieve.lucene.LuceneTopK`:
``TopHits.java``'s top k with ties by id and Anserini's score post-processing) give exactly
:class:`ikatkit.retrieve.bm25.Bm25Searcher`'s ranking and scores (tested on the 894 real passages). One partition
alone is searched with its own statistics, as a separately served index.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ikatkit.capabilities import Hit
from ikatkit.errors import IkatError
from ikatkit.index.lucene import open_reader
from ikatkit.index.manifest import MANIFEST, PARTITIONS, PARTITIONS_FILE, read_manifest
from ikatkit.retrieve.lucene import LuceneTopK, helper

Choice = tuple[int, ...]


class PartitionedSearcher:
    """``batch_search(queries, k, partitions=None)`` and ``texts(ids)`` as :class:`Bm25Searcher`; ``partitions``
    is one choice of partition numbers for every query, or ``{qid: choice}``; None or empty = all partitions."""

    expands_ptkb = True  # retrieve appends the PTKB statements (capabilities.expands_ptkb), as for BM25

    def __init__(self, folder: str | Path, k1: float = 0.9, b: float = 0.4, threads: int = 2) -> None:
        from ikatkit.java import autoclass, start_jvm

        self.folder = Path(folder)
        self.manifest = load_manifest(self.folder)
        self.count = int(self.manifest["partitions"])
        self.threads = threads
        start_jvm()
        from jnius import cast  # only once our JVM runs

        if helper("ikatkit.TopHits") is None:  # no JDK compiled the helper
            raise IkatError("partitioned search needs our Java helper TopHits.java compiled",
                            fix="install a JDK 11+ (javac on PATH or JAVA_HOME)")
        self._readers = [cast("org.apache.lucene.index.IndexReader", open_reader(self.folder / part["name"]))
                         for part in self.manifest["parts"]]
        self._multi = autoclass("org.apache.lucene.index.MultiReader")
        self._similarity = autoclass("org.apache.lucene.search.similarities.BM25Similarity")(k1, b)
        self._searchers: dict[Choice, LuceneTopK] = {}
        self.generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self.analyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()

    @property
    def all(self) -> Choice:
        return tuple(range(self.count))

    def choice(self, partitions: Sequence[int] | None) -> Choice:
        """The sorted partition numbers of a choice (all for None or empty); one clear error for a wrong one."""
        if not partitions:
            return self.all
        chosen = tuple(sorted(set(int(p) for p in partitions)))
        if chosen[0] < 0 or chosen[-1] >= self.count:
            raise IkatError(f"no partition {chosen[-1] if chosen[-1] >= self.count else chosen[0]}",
                            path=self.folder, fix=f"choose partitions 0..{self.count - 1}")
        return chosen

    def searcher(self, partitions: Sequence[int] | None = None) -> LuceneTopK:
        """The one Lucene top-k searcher over the chosen partitions' MultiReader (built once per choice)."""
        chosen = self.choice(partitions)
        if chosen not in self._searchers:
            reader = self._multi([self._readers[p] for p in chosen], False)
            self._searchers[chosen] = LuceneTopK(self._similarity, reader=reader, threads=self.threads)
        return self._searchers[chosen]

    def batch_search(self, queries: Mapping[str, str], k: int = 1000,
                     partitions: Sequence[int] | Mapping[str, Sequence[int]] | None = None) -> dict[str, list[Hit]]:
        """``{qid: [(passage id, score), ...]}`` for ``{qid: query}`` over the chosen partitions, on ``threads``
        threads."""
        groups: dict[Choice, list[str]] = {}
        for qid in queries:
            wanted = partitions.get(qid) if isinstance(partitions, Mapping) else partitions
            groups.setdefault(self.choice(wanted), []).append(qid)
        found: dict[str, list[Hit]] = {}
        for chosen, qids in groups.items():
            found.update(self.searcher(chosen).top_k(
                {qid: self.generator.buildQuery("contents", self.analyzer, queries[qid]) if queries[qid].strip()
                 else None for qid in qids}, k))
        return {qid: found.get(qid, []) for qid in queries}

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Stored passage texts by id, from whichever partition holds them; unknown ids left out."""
        return self.searcher(self.all).texts(ids)


def load_manifest(folder: str | Path) -> dict[str, Any]:
    """The partition manifest of ``folder``, checked against its indexes (one clear error if they differ)."""
    folder = Path(folder)
    path = folder / PARTITIONS_FILE
    found = read_manifest(folder) if path.is_file() else None
    if found is None or found["kind"] != PARTITIONS:
        raise IkatError(f"no partition manifest ({PARTITIONS_FILE})", path=folder,
                        fix="build it with `ikatkit index partition INDEX_OR_COLLECTION --out DIR`")
    manifest: dict[str, Any] = found
    try:
        parts = manifest["parts"]
        if len(parts) != manifest["partitions"]:
            raise ValueError(f"{len(parts)} parts listed for {manifest['partitions']} partitions")
    except (ValueError, KeyError, TypeError) as err:
        raise IkatError(f"unreadable partition manifest ({err})", path=path,
                        fix="partition again with `ikatkit index partition`") from None
    for part in parts:
        index = folder / part["name"] / MANIFEST
        if not index.is_file():
            raise IkatError(f"partition {part['name']} has no finished index", path=folder / part["name"],
                            fix="partition again with `ikatkit index partition` into a fresh folder")
        built = json.loads(index.read_text(encoding="utf-8"))
        if built["counts"]["passages"] != part["passages"] or built["built"] != part["built"]:
            raise IkatError(f"partition {part['name']} does not match the manifest ({built['counts']['passages']} "
                            f"passages built {built['built']}; manifest: {part['passages']} built {part['built']})",
                            path=path, fix="partition again with `ikatkit index partition` into a fresh folder")
    return manifest
