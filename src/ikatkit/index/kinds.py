"""The index kinds: one :class:`IndexKind` record each, in one table (:data:`INDEX_KINDS`).

A kind's record says everything the rest of ikatkit needs to know of it besides its code: its name (the manifest's
``kind``), what it is in words, the file its manifest is written to, how a user searches it (``ikatkit search``'s
option, a config's resource kind, the kinds it is searched as), the optional modules its searcher imports, where its
passage texts are, the command that builds it (none: a foreign layout ikatkit reads and never writes) and the names
users also write for it. :mod:`ikatkit.index.manifest` (the writer and reader of manifests, and the index builders and
searchers through it), :mod:`ikatkit.artifact` (what a folder is, and its searcher) and the resource table
(:mod:`ikatkit.pipelines.resources`) read these records, never a table of their own.

Where each kind's searcher class is (``module:Class``) is :data:`ikatkit.artifact.SEARCHERS`'s: the searchers read this
module (through the manifest), so naming them here would make the records import their own readers. A searcher's PTKB
expansion default is its class's ``expands_ptkb`` (:func:`ikatkit.capabilities.expands_ptkb`).

This module imports nothing of ikatkit.
"""

from __future__ import annotations

from dataclasses import dataclass

MANIFEST = "manifest.json"
PARTITIONS_FILE = "partitions.json"
BM25, DENSE, SPARSE, PARTITIONS, SPARSE_HDF5 = "bm25", "dense", "sparse", "partitions", "sparse-hdf5"
LUCENE = ("pyserini", "jnius")  # the modules a Lucene searcher imports
LUCENE_TEXTS, SHARD_TEXTS, SEARCHER_TEXTS = "lucene", "shards", "searcher"  # where a kind's passage texts are


@dataclass(frozen=True)
class IndexKind:
    """One index kind.

    - ``name``: the manifest's ``kind``; ``description``: what a folder of it is, in words ("a dense (faiss) index");
    - ``option``: the ``ikatkit search`` option that searches it (None: none does); ``resource``: the config resource
      kind that searches it; ``searched_as``: the kinds besides its own whose searches take it (the organizers'
      SPLADE index is searched as learned sparse);
    - ``modules``: the optional modules its searcher imports (their extras are named when one is absent);
    - ``texts``: where its passage texts are: :data:`LUCENE_TEXTS` (the Lucene index's stored fields),
      :data:`SHARD_TEXTS` (the text shards of the encoding job, or the Lucene index it was encoded from),
      :data:`SEARCHER_TEXTS` (its searcher's), None (it stores none);
    - ``built_by``: the command that builds it (None: a foreign layout, read as it comes and never written);
      ``manifest``: the file in its folder its manifest is written to, last; ``unnamed``: a manifest in that file
      without ``kind`` (an earlier version's) is this kind;
    - ``aliases``: other names users write for it (a config's resource kind)."""

    name: str
    description: str
    option: str | None
    resource: str
    modules: tuple[str, ...]
    texts: str | None
    built_by: str | None = None
    manifest: str = MANIFEST
    unnamed: bool = False
    searched_as: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    @property
    def own(self) -> bool:
        """Whether ikatkit builds it (and it has a manifest)."""
        return self.built_by is not None


INDEX_KINDS: dict[str, IndexKind] = {kind.name: kind for kind in (
    IndexKind(BM25, "a Lucene BM25 index", "--index DIR", "bm25", LUCENE, LUCENE_TEXTS,
              built_by="ikatkit index build", unnamed=True),
    IndexKind(DENSE, "a dense (faiss) index", "--dense DIR", "dense", ("torch", "sentence_transformers", "faiss"),
              SHARD_TEXTS, built_by="ikatkit index dense"),
    IndexKind(SPARSE, "a learned sparse (SPLADE) impact index", "--sparse DIR", "sparse",
              (*LUCENE, "torch", "transformers"), LUCENE_TEXTS, built_by="ikatkit index sparse",
              aliases=("splade",)),  # a name users already write
    IndexKind(PARTITIONS, "a partitioned BM25 index", None, "partitioned-bm25", LUCENE, SEARCHER_TEXTS,
              built_by="ikatkit index partition", manifest=PARTITIONS_FILE, unnamed=True),
    IndexKind(SPARSE_HDF5, "the organizers' SPLADE index (naver/splade's HDF5 layout)", "--sparse DIR", "sparse",
              ("h5py", "numba", "torch", "transformers"), None, searched_as=(SPARSE,)),
)}
"""Every index kind ikatkit builds or reads, by name (ikatkit's own first, in the order they were added)."""


def canonical(name: str) -> str:
    """The kind ``name`` is an alias of (``splade``: ``sparse``), else ``name`` itself."""
    return next((kind.name for kind in INDEX_KINDS.values() if name in kind.aliases), name)


def described(name: str) -> str:
    """What a folder of kind ``name`` is, in words (an unknown name as it is)."""
    return INDEX_KINDS[name].description if name in INDEX_KINDS else name


def takes(wanted: str, found: str) -> bool:
    """Whether a search for kind ``wanted`` takes an index of kind ``found`` (its own, or one searched as it)."""
    return found == wanted or (found in INDEX_KINDS and wanted in INDEX_KINDS[found].searched_as)


def manifest_files() -> dict[str, str]:
    """Each manifest file, in the order read, and the kind a manifest in it without ``kind`` is."""
    return {kind.manifest: kind.name for kind in INDEX_KINDS.values() if kind.unnamed}
