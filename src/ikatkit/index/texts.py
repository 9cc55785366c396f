"""The one place passage texts are read from, whatever holds them.

Sources, each answering ``texts(ids) -> {id: text}`` (ids it lacks are left out):

- a Lucene index, ikatkit's own or foreign (:class:`LuceneTexts`): the document whose ``id`` term is the passage id;
  its text is, in this order, the ``contents`` of the stored ``raw`` JSON (``-storeRaw``: ikatkit's indexes and the
  organizers' prebuilt one), else the stored ``contents`` field (``-storeContents``), else the stored ``raw`` itself
  when it is not JSON (a collection whose raw document is plain text). An index storing neither is refused when
  opened for texts (:meth:`ikatkit.index.lucene.IndexInfo.require_texts`), naming the index and the fix;
- a dense index's own text shards (:class:`ShardTexts`, parquet ``id``/``text``), used when no Lucene index is
  at hand;
- passages JSONL files (:func:`jsonl_texts`, ``{"id", "contents"}`` lines, read whole: small files).

:func:`index_records` streams every stored passage of a Lucene index in index order (dense encoding, partitioning).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.index.lucene import ID_FIELD, IdLookup, lucene_info, open_reader

TextsFunction = Callable[[Sequence[str]], dict[str, str]]


def stored_record(document: Any) -> dict[str, Any] | None:
    """``{"id", "contents", ...}`` of a stored Lucene document (the raw JSON's fields when it has them), else None."""
    raw = document.get("raw")
    record: Any = None
    if raw is not None:
        try:
            record = json.loads(raw)
        except ValueError:
            record = None
    if not isinstance(record, dict) or not isinstance(record.get("contents"), str):
        contents = document.get("contents")
        if contents is None and raw is not None and record is None:
            contents = raw  # raw text, not JSON
        if contents is None:
            return None
        record = {"contents": contents}
    record.setdefault("id", document.get(ID_FIELD))
    return record


class LuceneTexts:
    """Stored passage texts of a Lucene index folder, or of an open ``reader`` (e.g. a MultiReader of partitions)."""

    def __init__(self, index: str | Path | None = None, reader: Any = None, why: str = "passage texts") -> None:
        from ikatkit.java import start_jvm

        start_jvm()
        from jnius import cast  # only once our JVM runs

        if reader is None:
            info = lucene_info(index)  # type: ignore[arg-type]  # callers pass an index or a reader
            info.require_texts(why)
            reader = open_reader(info.path)
        self.reader = reader = cast("org.apache.lucene.index.IndexReader", reader)
        self._ids = IdLookup(reader)
        self._found: dict[str, str] = {}

    def text(self, pid: str) -> str | None:
        if pid not in self._found:
            doc = self._ids.doc(pid)
            if doc is None:
                return None
            record = stored_record(self.reader.storedFields().document(doc))  # one per call: not thread-safe
            if record is None:
                return None
            self._found[pid] = record["contents"]
        return self._found[pid]

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        return {pid: text for pid in ids if (text := self.text(pid)) is not None}


def index_records(index: str | Path, why: str = "its passages") -> Iterator[dict[str, Any]]:
    """Every stored passage of a Lucene index in index order, as ``{"id", "contents", ...}`` (deleted ones skipped)."""
    from ikatkit.java import autoclass

    info = lucene_info(index)
    info.require_texts(why)
    reader = open_reader(info.path)
    try:
        live = autoclass("org.apache.lucene.index.MultiBits").getLiveDocs(reader)
        stored = reader.storedFields()
        for doc in range(reader.maxDoc()):
            if live is not None and not live.get(doc):
                continue
            record = stored_record(stored.document(doc))
            if record is None or not record.get("id"):
                raise IkatError(f"stored document {doc} has no id and text", path=info.path,
                                fix="use an index whose every document stores its text (-storeRaw)")
            yield record
    finally:
        reader.close()


class ShardTexts:
    """Texts of a dense index's parquet shards (``texts/NNNNN.parquet``: ``id``, ``text``), ``shard_size`` rows each."""

    def __init__(self, shards: list[Path], ids: Any, shard_size: int) -> None:
        self.shards, self.ids, self.shard_size = shards, ids, shard_size
        self._rows: dict[str, int] | None = None

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        import pyarrow.parquet as pq

        if self._rows is None:
            self._rows = {pid: row for row, pid in enumerate(self.ids.to_pylist())}
        wanted: dict[int, list[tuple[str, int]]] = {}
        for pid in ids:
            if pid in self._rows:
                shard, row = divmod(self._rows[pid], self.shard_size)
                wanted.setdefault(shard, []).append((pid, row))
        found = {}
        for shard, rows in wanted.items():
            column = pq.read_table(self.shards[shard], columns=["text"]).column("text")
            found.update({pid: column[row].as_py() for pid, row in rows})
        return found


def jsonl_texts(paths: Sequence[str | Path]) -> TextsFunction:
    """``texts(ids)`` over passages JSONL files (``{"id", "contents"}`` per line), read once."""
    from ikatkit.collection.readers import passage_texts as read_passages

    for path in map(Path, paths):
        if not path.is_file():
            raise IkatError("passages file not found", path=path, fix="pass a passages JSONL, or --index")
    found = read_passages(paths)
    return lambda ids: {pid: found[pid] for pid in ids if pid in found}


def passage_texts(paths: Sequence[str | Path] = (), index: str | Path | None = None,
                  why: str = "passage texts") -> TextsFunction:
    """``texts(ids)`` of a Lucene index when given, else of passages JSONL files."""
    if index is not None:
        return LuceneTexts(index, why=why).texts
    return jsonl_texts(paths)
