"""Check passages against the organizers' passage hashes (``2023_passages_hashes.tsv[.bz2]``, read by
:mod:`ikatkit.index.hashes`).

Both sides are streamed in that order and merged, so memory stays flat whatever the file's size (116,838,987
lines): a Lucene index's ids come sorted from its ``id`` terms, a passages JSONL must list each document's
passages together with the documents in id order (as the official files do); within a document, passages are
put in number order on the fly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.index.hashes import Key, open_text, passage_md5, read_hashes
from ikatkit.index.lucene import ID_FIELD, NO_MORE_DOCS, is_lucene_folder, lucene_info, open_reader

EXAMPLES = 5  # ids shown per kind of difference
KINDS = ("different", "missing", "extra")


@dataclass
class Report:
    """Counts of passages that match, differ in text, are missing (in the hash file, not here) or extra (here,
    not in the hash file), with the first few ids of each kind."""

    matched: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    examples: dict[str, list[str]] = field(default_factory=lambda: {kind: [] for kind in KINDS})

    def add(self, kind: str, key: Key) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(f"{key[0]}:{key[1]}")

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def __str__(self) -> str:
        names = {"different": "different text", "missing": "missing (in the hash file only)",
                 "extra": "extra (not in the hash file)"}
        lines = [f"matched: {self.matched}"]
        for kind in KINDS:
            shown = f"  e.g. {', '.join(self.examples[kind])}" if self.counts[kind] else ""
            lines.append(f"{names[kind]}: {self.counts[kind]}{shown}")
        lines.append("all passages match the official hashes" if self.ok else "passages differ from the official ones")
        return "\n".join(lines)


def _split(pid: str) -> Key | None:
    doc, sep, number = pid.rpartition(":")
    return (doc, int(number)) if sep and doc and number.isdigit() else None


def _grouped(items: Iterator[tuple[str, str]], source: Path) -> Iterator[tuple[Key, str]]:
    """``(key, md5)`` in key order from ``(passage id, md5)`` whose documents come in id order, each document's
    passages together (in any order)."""
    group: list[tuple[Key, str]] = []
    done: str | None = None
    for pid, digest in items:
        key = _split(pid)
        if key is None:
            raise IkatError(f"passage id {pid!r} is not doc_id:passage_number", path=source,
                            fix="verify passages with official ids (e.g. clueweb22-en0000-00-00000:0)")
        if group and key[0] != group[0][0][0]:
            yield from sorted(group)
            done, group = group[0][0][0], []
        if done is not None and key[0] <= done:
            raise IkatError(f"passages not in document id order ({pid} after document {done})", path=source,
                            fix="list the passages sorted by document id, each document's passages together")
        group.append((key, digest))
    yield from sorted(group)


def _jsonl_md5s(path: Path) -> Iterator[tuple[str, str]]:
    with open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                yield str(record["id"]), passage_md5(record["contents"])
            except (ValueError, KeyError, TypeError):
                raise IkatError("expected a JSON object with id and contents", path=path, where=f"line {number}",
                                fix="pass the passages JSONL ({\"id\", \"contents\", \"url\"} per line)") from None


def _index_md5s(index: Path) -> Iterator[tuple[str, str]]:
    """Every passage of a Lucene index in id order (its ``id`` terms, sorted by Lucene) with its text's md5."""
    from ikatkit.index.texts import stored_record
    from ikatkit.java import autoclass

    info = lucene_info(index)
    info.require_texts("`index verify`")
    reader = open_reader(info.path)
    try:
        from jnius import cast

        terms = autoclass("org.apache.lucene.index.MultiTerms").getTerms(
            cast("org.apache.lucene.index.IndexReader", reader), ID_FIELD)
        live = autoclass("org.apache.lucene.index.MultiBits").getLiveDocs(reader)
        stored, postings = reader.storedFields(), None
        enum = terms.iterator() if terms is not None else None
        while enum is not None and enum.next() is not None:
            postings = enum.postings(postings, 0)
            doc = postings.nextDoc()
            while doc != NO_MORE_DOCS and live is not None and not live.get(doc):
                doc = postings.nextDoc()
            if doc == NO_MORE_DOCS:
                continue
            record = stored_record(stored.document(doc))
            if record is None:
                raise IkatError(f"document {doc} stores no text", path=info.path,
                                fix="use an index built with -storeRaw")
            yield enum.term().utf8ToString(), passage_md5(record["contents"])
    finally:
        reader.close()


def verify(source: str | Path, hashes: str | Path) -> Report:
    """Merge ``source`` (a Lucene index folder or a passages JSONL) with the hash file; the :class:`Report`."""
    source = Path(source)
    if is_lucene_folder(source):
        ours = _grouped(_index_md5s(source), source)
    elif source.is_file():
        ours = _grouped(_jsonl_md5s(source), source)
    else:
        raise IkatError("neither a Lucene index nor a passages file", path=source,
                        fix="pass an index folder (with segments_N) or a passages JSONL")
    report = Report()
    theirs = read_hashes(hashes)
    mine, official = next(ours, None), next(theirs, None)
    while mine is not None or official is not None:
        if official is None or (mine is not None and mine[0] < official[0]):
            assert mine is not None  # the loop runs while either side has an entry
            report.add("extra", mine[0])
            mine = next(ours, None)
        elif mine is None or official[0] < mine[0]:
            report.add("missing", official[0])
            official = next(theirs, None)
        else:
            if mine[1] == official[1]:
                report.matched += 1
            else:
                report.add("different", mine[0])
            mine, official = next(ours, None), next(theirs, None)
    return report
