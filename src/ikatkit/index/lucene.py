"""What a Lucene index folder holds: ikatkit's own (``manifest.json`` of ``index build``) or foreign (built by
Anserini or Pyserini elsewhere, e.g. the organizers' prebuilt ``ikat_2023_passage_index``).

A foreign index is opened read-only: nothing is ever written inside it (it may sit on a read-only mount). What
ikatkit needs to know is read from Lucene itself: the latest commit (segments file name, generation, segment ids:
the fingerprint of resumable runs, instead of hashing the files), the document count, the fields (the ``id`` field
and its doc values, the stored text field: ``raw`` with the JSON of ``-storeRaw``, else ``contents`` of
``-storeContents``), and whether positions and doc vectors were indexed. Reading this takes milliseconds once the
JVM runs, so it is kept in memory only (per process), not cached on disk.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.index.manifest import BM25, MANIFEST
from ikatkit.suggest import path_fix

ID_FIELD = "id"  # Anserini's Constants.ID
TEXT_FIELDS = ("raw", "contents")  # stored: the source JSON (-storeRaw), else the text (-storeContents)
BODY_FIELD = "contents"  # the searched field
NO_MORE_DOCS = 2147483647  # Lucene's DocIdSetIterator.NO_MORE_DOCS
ANSERINI_ANALYZER = "Anserini's DefaultEnglishAnalyzer (Porter stemmer, Lucene's English stop words)"


@dataclass(frozen=True)
class IndexInfo:
    """A Lucene index as detected; ``manifest`` is None for a foreign one."""

    path: Path
    manifest: dict[str, Any] | None
    documents: int
    lucene_version: str
    segments_file: str
    generation: int
    segment_ids: tuple[str, ...]
    stored_fields: tuple[str, ...]  # stored on the first document
    text_field: str | None  # raw, contents or None
    id_doc_values: str | None  # BINARY (Anserini today), SORTED (older Anserini) or None
    positions: bool
    docvectors: bool
    fields: dict[str, str] = field(default_factory=dict)  # name -> index options

    @property
    def own(self) -> bool:
        return self.manifest is not None

    @property
    def kind(self) -> str:
        """The manifest's kind (``bm25`` or ``sparse``; ``bm25`` for a foreign index or an earlier version's)."""
        return (self.manifest or {}).get("kind", BM25)

    @property
    def analyzer(self) -> str:
        if self.own:
            return ANSERINI_ANALYZER
        return f"not recorded in a Lucene index; ikatkit searches with {ANSERINI_ANALYZER}, Anserini's default"

    @property
    def identity(self) -> str:
        """Changes when the index does: the manifest's text of an own index, Lucene's commit of a foreign one."""
        if self.manifest is not None:
            return (self.path / MANIFEST).read_text(encoding="utf-8")
        return json.dumps({"segments_file": self.segments_file, "generation": self.generation,
                           "segments": self.segment_ids, "documents": self.documents}, sort_keys=True)

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.identity.encode()).hexdigest()

    def describe(self) -> dict[str, Any]:
        """What ``index stats`` prints."""
        found = {k: v for k, v in asdict(self).items() if k not in ("manifest", "path")}
        found.update(path=str(self.path), built=("by ikatkit (manifest.json)" if self.own else "built outside ikatkit"),
                     analyzer=self.analyzer, fingerprint=self.fingerprint,
                     segments=len(self.segment_ids))  # a query alone splits them in parts (ParallelSearch.java)
        return {**(self.manifest or {}), "lucene": found}

    def require_texts(self, why: str = "passage texts") -> str:
        """The stored text field, or one clear error naming the index and the fix."""
        if self.text_field is None:
            raise IkatError(f"this index stores no passage text (stored fields: {list(self.stored_fields)}), "
                            f"needed for {why}", path=self.path,
                            fix="use an index built with -storeRaw (or -storeContents), e.g. the organizers' "
                                "prebuilt one, or pass the passages JSONL where the command takes --passages")
        return self.text_field


def is_lucene_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder with a Lucene commit (a ``segments_N`` file)."""
    path = Path(path)
    return path.is_dir() and any(path.glob("segments_*"))


def check_index(index: str | Path) -> Path:
    """The folder of a Lucene index (own or foreign), or one clear error."""
    return lucene_info(index).path


def lucene_info(index: str | Path) -> IndexInfo:
    """The detected :class:`IndexInfo` of ``index`` (read once per process)."""
    return _open(str(Path(index).resolve()))


@lru_cache(maxsize=32)
def _open(folder: str) -> IndexInfo:
    path = Path(folder)
    if not path.is_dir():
        raise IkatError("no index folder here", path=path, fix=path_fix(path, "give the folder of a Lucene index"))
    own = path / MANIFEST
    if not any(path.glob("segments_*")):
        if own.exists() or any(path.glob(".*.building-*")):
            raise IkatError("no finished index here (no Lucene commit)", path=path,
                            fix="build it with `ikatkit index build INPUT... --out DIR`")
        found = sorted(p.name for p in path.iterdir())[:5]
        raise IkatError(f"not a Lucene index (no segments_N file; found {found or 'an empty folder'})", path=path,
                        fix="give the folder that holds segments_N (an unpacked prebuilt index: the inner folder)")
    manifest = json.loads(own.read_text(encoding="utf-8")) if own.exists() else None
    return _read(path, manifest)


def _read(path: Path, manifest: dict[str, Any] | None) -> IndexInfo:
    from ikatkit.java import autoclass, start_jvm

    start_jvm()
    from jnius import JavaException  # only once our JVM runs: importing jnius first would start a bare one

    directory = autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.io.File")(str(path)).toPath())
    try:
        commit = autoclass("org.apache.lucene.index.SegmentInfos").readLatestCommit(directory)
        reader = autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
    except JavaException as err:
        raise _lucene_error(path, err) from None
    try:
        infos = autoclass("org.apache.lucene.index.FieldInfos").getMergedFieldInfos(reader)
        fields = {fi.name: fi.getIndexOptions().toString() for fi in infos.iterator()}
        body = infos.fieldInfo(BODY_FIELD)
        id_info = infos.fieldInfo(ID_FIELD)
        id_values = id_info.getDocValuesType().toString() if id_info is not None else "NONE"
        stored: tuple[str, ...] = ()
        if reader.maxDoc() > 0:
            first = _first_live(reader)
            stored = tuple(dict.fromkeys(f.name() for f in reader.storedFields().document(first).getFields()
                                         .toArray()))
        segment_ids = tuple(_hex(info.info.getId()) for info in commit.asList().toArray())
        return IndexInfo(
            path=path, manifest=manifest, documents=reader.numDocs(),
            lucene_version=commit.getCommitLuceneVersion().toString(), segments_file=commit.getSegmentsFileName(),
            generation=commit.getGeneration(), segment_ids=segment_ids, stored_fields=stored,
            text_field=next((f for f in TEXT_FIELDS if f in stored), None),
            id_doc_values=id_values if id_values in ("BINARY", "SORTED") else None,
            positions=body is not None and "POSITIONS" in body.getIndexOptions().toString(),
            docvectors=body is not None and bool(body.hasVectors()), fields=fields)
    except JavaException as err:
        raise _lucene_error(path, err) from None
    finally:
        reader.close()


def open_reader(folder: str | Path) -> Any:
    """A Lucene ``DirectoryReader`` over ``folder`` (read-only; the caller closes it)."""
    from ikatkit.java import autoclass

    return autoclass("org.apache.lucene.index.DirectoryReader").open(
        autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.io.File")(str(folder)).toPath()))


def postings_summary(folder: str | Path) -> dict[str, Any]:
    """What two builders of one index must agree on: every field's (name, index options, doc values, omits norms),
    the documents, and the searched field's postings and term-frequency totals."""
    from ikatkit.java import autoclass

    reader = open_reader(folder)
    try:
        infos = autoclass("org.apache.lucene.index.FieldInfos").getMergedFieldInfos(reader).iterator()
        fields = []
        while infos.hasNext():
            info = infos.next()
            fields.append((info.name, info.getIndexOptions().toString(), info.getDocValuesType().toString(),
                           bool(info.omitsNorms())))
        return {"fields": sorted(fields), "documents": reader.maxDoc(), "postings": reader.getSumDocFreq(BODY_FIELD),
                "frequencies": reader.getSumTotalTermFreq(BODY_FIELD)}
    finally:
        reader.close()


class IdLookup:
    """The live document of a passage id (its ``id`` term) in an open reader: the one way ids are looked up
    (``validate --index``, passage texts). Thread-safe (one term enumerator, behind a lock)."""

    def __init__(self, reader: Any) -> None:
        from ikatkit.java import autoclass
        from jnius import cast  # only once our JVM runs

        reader = cast("org.apache.lucene.index.IndexReader", reader)
        terms = autoclass("org.apache.lucene.index.MultiTerms").getTerms(reader, ID_FIELD)
        self._enum = terms.iterator() if terms is not None else None
        self._live = autoclass("org.apache.lucene.index.MultiBits").getLiveDocs(reader)
        self._term = autoclass("org.apache.lucene.index.Term")
        self._postings: Any = None
        self._lock = threading.Lock()

    def doc(self, pid: str) -> int | None:
        """The document number of ``pid``, or None when the index lacks it (or holds it deleted only)."""
        with self._lock:
            if self._enum is None or not self._enum.seekExact(self._term(ID_FIELD, pid).bytes()):
                return None
            self._postings = self._enum.postings(self._postings, 0)
            doc = self._postings.nextDoc()
            while doc != NO_MORE_DOCS and self._live is not None and not self._live.get(doc):
                doc = self._postings.nextDoc()
            return None if doc == NO_MORE_DOCS else doc


def _first_live(reader: Any) -> int:
    from ikatkit.java import autoclass

    live = autoclass("org.apache.lucene.index.MultiBits").getLiveDocs(reader)
    return 0 if live is None else next(doc for doc in range(reader.maxDoc()) if live.get(doc))


def _hex(raw: Any) -> str:
    return bytes(b & 0xFF for b in raw).hex() if raw is not None else ""


def _lucene_error(path: Path, err: Exception) -> IkatError:
    """One line for what Lucene refused: another major version, a corrupt index, anything else."""
    kind = getattr(err, "classname", "") or ""
    message = (getattr(err, "innermessage", None) or str(err)).strip().splitlines()[0][:300]
    if "IndexFormatToo" in kind:
        return IkatError(f"a Lucene index of a version this Lucene cannot read ({message})", path=path,
                         fix="use an index built with Lucene 9 (Anserini 0.16+ / Pyserini 0.18+), or rebuild it "
                             "with `ikatkit index build`")
    if "Corrupt" in kind or "EOFException" in kind or "NoSuchFile" in kind or "FileNotFound" in kind:
        return IkatError(f"a corrupt or incomplete Lucene index ({kind.rsplit('.', 1)[-1]}: {message})", path=path,
                         fix="download or unpack the index again (check its checksum)")
    return IkatError(f"Lucene cannot open this index ({kind.rsplit('.', 1)[-1]}: {message})", path=path,
                     fix="check that this is a complete Lucene index folder")


def summary(info: IndexInfo) -> str:
    """One line: what was detected."""
    where = "ikatkit's own index" if info.own else "built outside ikatkit"
    text = f"texts from stored {info.text_field!r}" if info.text_field else "no stored passage text"
    return (f"{info.path}: {where}, {info.documents} documents, Lucene {info.lucene_version}, {text}, "
            f"positions {'yes' if info.positions else 'no'}, docvectors {'yes' if info.docvectors else 'no'}")


def index_identity(index: str | Path | None) -> str:
    """What changes with an index (run fingerprints): its manifest (ikatkit's Lucene or dense index), a foreign
    Lucene index's commit, else the path as given."""
    manifest = Path(index) / MANIFEST if index is not None else None
    if manifest is not None and manifest.exists():  # ours (Lucene or dense): read without starting the JVM
        return manifest.read_text(encoding="utf-8")
    if index is not None and is_lucene_folder(index):
        return lucene_info(index).identity
    return str(index)
