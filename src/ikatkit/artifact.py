"""What an index folder is, and the searcher and passage texts it builds (as PyTerrier's artifacts say what they are
and build their retrievers).

:func:`open_index` reads a folder without loading it: ikatkit's own index of any kind (its manifest,
:mod:`ikatkit.index.manifest`; a Lucene manifest of an earlier version without ``kind`` is a BM25 index), a foreign
Lucene index (Anserini's or Pyserini's: BM25, or an impact index when searched as learned sparse), or the organizers'
SPLADE index in naver/splade's HDF5 layout (``array_index.h5py``, ``doc_ids.pkl``). Foreign indexes are read as they
come and never written. :meth:`IndexFolder.searcher` builds the kind's searcher (the resource table and
``ikatkit search`` build every searcher here), :meth:`IndexFolder.texts` its passage texts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.index.kinds import (BM25, DENSE, INDEX_KINDS, LUCENE_TEXTS, MANIFEST, PARTITIONS, SEARCHER_TEXTS,
                                 SHARD_TEXTS, SPARSE, SPARSE_HDF5, IndexKind, canonical, takes)
from ikatkit.index.manifest import read_manifest, wrong_kind
from ikatkit.index.texts import TextsFunction
from ikatkit.suggest import path_fix

HDF5_ARRAY = "array_index.h5py"  # the organizers' SPLADE index (ikatkit.index.sparse_hdf5)
SEARCHERS = {BM25: "ikatkit.retrieve.bm25:Bm25Searcher", DENSE: "ikatkit.retrieve.dense:DenseSearcher",
             SPARSE: "ikatkit.retrieve.sparse:SparseSearcher",
             PARTITIONS: "ikatkit.retrieve.partitioned:PartitionedSearcher",
             SPARSE_HDF5: "ikatkit.retrieve.sparse_hdf5:HDF5SparseSearcher"}
"""Each index kind's searcher class (``module:Class``, imported when first asked for, so that nothing loads PyTorch or
Pyserini before a search): the one fact of a kind not in its :class:`ikatkit.index.kinds.IndexKind` record, as the
searchers read those records (through the manifest)."""


def searcher_class(kind: str) -> type[Any]:
    """The searcher class of index ``kind`` (imported now)."""
    module, _, name = SEARCHERS[kind].partition(":")
    found: type[Any] = getattr(import_module(module), name)
    return found


@dataclass(frozen=True)
class IndexFolder:
    """An index folder as detected: its ``kind``, and its ``manifest`` (None for a foreign index)."""

    path: Path
    kind: str
    manifest: dict[str, Any] | None

    @property
    def own(self) -> bool:
        return self.manifest is not None

    @property
    def index_kind(self) -> IndexKind:
        """Its kind's record."""
        return INDEX_KINDS[self.kind]

    def modules(self) -> list[str]:
        """The optional modules its searcher imports."""
        return list(self.index_kind.modules)

    def searcher_class(self) -> type[Any]:
        return searcher_class(self.kind)

    def factory(self) -> Callable[..., Any]:
        """What builds its searcher from ``(path, **options)``: the searcher class, or for the organizers' SPLADE index
        :func:`hdf5_searcher` (its query encoder's options too); its signature is the options it takes."""
        return hdf5_searcher if self.kind == SPARSE_HDF5 else self.searcher_class()

    def searcher(self, **options: Any) -> Any:
        """The kind's searcher over this folder with ``options`` (the searcher's own: ``k1``, ``threads``...; the
        organizers' SPLADE index takes ``model``, ``device`` and ``max_length`` for its query encoder)."""
        return self.factory()(self.path, **options)

    def texts(self, why: str = "passage texts") -> TextsFunction:
        """``texts(ids)`` of the passages this index stores (ids it lacks are left out); one clear error for an
        index that stores none (the organizers' SPLADE index: its texts come from a ``texts`` resource)."""
        from ikatkit.index.texts import LuceneTexts

        stored = self.index_kind.texts
        if stored == LUCENE_TEXTS:
            return LuceneTexts(self.path, why=why).texts
        if stored == SHARD_TEXTS:
            from ikatkit.index.dense import stored_texts

            assert self.manifest is not None  # shards are written by ikatkit's own encoding job
            return stored_texts(self.path, self.manifest)
        if stored == SEARCHER_TEXTS:
            return self.searcher().texts
        raise IkatError(f"{self.index_kind.description} holds no passage text, needed for {why}", path=self.path,
                        fix='declare a texts resource ([resources.texts] kind = "texts", index = the organizers\' '
                            "BM25 index, which stores each passage's raw JSON, or passages = [JSONL files]), or pass "
                            "--index BM25_INDEX")


def hdf5_searcher(path: str | Path, model: str | None = None, device: str = "cpu", threads: int | None = None,
                  max_length: int | None = None, query_encoder: Any = None) -> Any:
    """The exact searcher of the organizers' SPLADE index at ``path``; its query encoder ``query_encoder``, else
    ``model`` (default: the organizers' model) on ``device``, queries cut at ``max_length`` tokens (default: the
    official baseline's)."""
    from ikatkit.index.sparse_encoder import DEFAULT_MODEL, SparseEncoder
    from ikatkit.index.sparse_hdf5 import open_hdf5_index

    index = open_hdf5_index(path)  # a bad folder is refused before the model loads
    if query_encoder is None:
        query_encoder = SparseEncoder(model or DEFAULT_MODEL, device.removeprefix("torch:"))
    lengths = {} if max_length is None else {"max_length": max_length}
    return searcher_class(SPARSE_HDF5)(index, query_encoder, threads=threads, device=device, **lengths)


def open_index(path: str | Path, kind: str | None = None) -> IndexFolder:
    """What ``path`` is: an :class:`IndexFolder` of ikatkit's own kind or a foreign one, without loading it. ``kind``
    (a resource kind, an alias) says what it is searched as: a foreign Lucene index is then that kind, and a folder of
    another kind is one clear error naming what it is and how to search it."""
    folder = Path(path)
    wanted = None if kind is None else canonical(kind)
    what = INDEX_KINDS[wanted].description if wanted in INDEX_KINDS else "an index"
    what = what.replace("a Lucene BM25 index", "a Lucene index")
    if not folder.is_dir():
        raise IkatError("no index folder here", path=folder, fix=path_fix(folder, f"give the folder of {what}"))
    manifest = read_manifest(folder)
    if manifest is not None:
        found = IndexFolder(folder, manifest["kind"], manifest)
    elif (folder / HDF5_ARRAY).exists():
        found = IndexFolder(folder, SPARSE_HDF5, None)
    elif any(folder.glob("segments_*")):
        found = IndexFolder(folder, SPARSE if wanted == SPARSE else BM25, None)
    elif (folder / "work.json").exists() or (folder / ".work").exists() or any(folder.glob(".*.building-*")):
        raise IkatError("no finished index here (an interrupted build?)", path=folder,
                        fix="run the command that builds it again: it resumes")
    else:
        seen = sorted(p.name for p in folder.iterdir())[:5]
        lacking = ("no segments_N file" if wanted == BM25
                   else f"no {MANIFEST}, Lucene commit (segments_N) or {HDF5_ARRAY}")
        raise IkatError(f"not {what} ({lacking}; found {seen or 'an empty folder'})", path=folder,
                        fix="give the folder that holds segments_N (an unpacked prebuilt index: the inner folder)"
                        if wanted == BM25 else "give the folder that holds the index (an unpacked prebuilt index: the "
                                               "inner folder)")
    if wanted is not None and not takes(wanted, found.kind):
        raise wrong_kind(folder, found.kind, wanted)
    return found
