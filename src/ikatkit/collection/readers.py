"""Streaming readers: each yields passages and counts bad records (file, line, reason) instead of dying.

Formats: ``clueweb22`` (raw records ``ClueWeb22-ID``/``URL``/``Clean-Text`` in ``.json.gz``/``.json``/``.jsonl``,
segmented the iKAT way), ``jsonl`` (passages ``{id, contents, url}``), ``provenance`` (the organizers'
provenance-passage JSONL ``{doc_id, passage_id, passage_text}``, id ``doc_id:passage_id``), ``trecweb`` (``<DOC>`` with
``<PASSAGE id=N>`` blocks), ``car`` (TREC CAR paragraphs, cbor), ``msmarco`` (``id<TAB>text``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ikatkit.collection.segment import Splitter, rule_splitter, segment
from ikatkit import jsonl
from ikatkit.errors import IkatError
from ikatkit.textfile import open_binary, open_text

FORMATS = ("clueweb22", "jsonl", "provenance", "trecweb", "car", "msmarco")
MAX_KEPT_PROBLEMS = 20
# Anserini drops a passage whose text Java's trim() empties (characters <= U+0020); Unicode white space too.
_BLANK = "".join(chr(c) for c in range(0x3001) if c <= 0x20 or chr(c).isspace())


class Passage(NamedTuple):
    """A passage and the line (record number for CAR) of its record in the input file."""

    id: str
    contents: str
    url: str = ""
    line: int = 0


@dataclass
class ReadStats:
    """Counts of what was read and skipped; the first problems are kept with file and line."""

    documents: int = 0
    passages: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)

    def skip(self, path: Path, line: int, reason: str) -> None:
        self.skipped += 1
        if len(self.problems) < MAX_KEPT_PROBLEMS:
            self.problems.append(f"{path}:{line}: {reason}")

    def merge(self, other: ReadStats) -> None:
        self.documents += other.documents
        self.passages += other.passages
        self.skipped += other.skipped
        self.problems.extend(other.problems[: MAX_KEPT_PROBLEMS - len(self.problems)])


def _json_lines(path: Path, stats: ReadStats) -> Iterator[tuple[int, dict]]:
    with open_text(path) as handle:
        for number, record in jsonl.records(handle):
            if isinstance(record, jsonl.Invalid):
                stats.skip(path, number, jsonl.problem(record))
            elif not isinstance(record, dict):
                stats.skip(path, number, "not a JSON object")
            else:
                yield number, record


def read_clueweb22(path: Path, stats: ReadStats, split: Splitter = rule_splitter) -> Iterator[Passage]:
    for number, record in _json_lines(path, stats):
        doc_id, text = record.get("ClueWeb22-ID"), record.get("Clean-Text")
        if not isinstance(doc_id, str) or not isinstance(text, str):
            stats.skip(path, number, "missing ClueWeb22-ID or Clean-Text")
            continue
        stats.documents += 1
        url = record.get("URL", "")
        for pid, contents in segment(doc_id, text, split):
            yield Passage(pid, contents, url, number)


def _count_document(stats: ReadStats, seen: set[str], doc_id: str) -> None:
    """Count ``doc_id`` once per file, however far apart its passages are (``doc_id:N`` passage ids)."""
    if doc_id not in seen:
        seen.add(doc_id)
        stats.documents += 1


def read_jsonl(path: Path, stats: ReadStats, split: Splitter = rule_splitter) -> Iterator[Passage]:
    """Passages ``{id, contents[, url]}``; an id ``doc_id:N`` counts as a passage of document ``doc_id``."""
    seen: set[str] = set()
    for number, record in _json_lines(path, stats):
        pid, contents = record.get("id"), record.get("contents")
        if not isinstance(pid, str) or not pid or not isinstance(contents, str):
            stats.skip(path, number, "a passage needs string fields 'id' and 'contents'")
            continue
        _count_document(stats, seen, pid.rsplit(":", 1)[0])
        yield Passage(pid, contents, record.get("url", "") or "", number)


def read_provenance(path: Path, stats: ReadStats, split: Splitter = rule_splitter) -> Iterator[Passage]:
    """The organizers' provenance passages (``{doc_id, passage_id, passage_text}``), already segmented."""
    seen: set[str] = set()
    for number, record in _json_lines(path, stats):
        doc_id, number_, contents = record.get("doc_id"), record.get("passage_id"), record.get("passage_text")
        if not isinstance(doc_id, str) or not doc_id or not isinstance(number_, (str, int)) \
                or isinstance(number_, bool) or str(number_) == "" or not isinstance(contents, str):
            stats.skip(path, number, "a provenance passage needs 'doc_id', 'passage_id' and 'passage_text'")
            continue
        _count_document(stats, seen, doc_id)
        yield Passage(f"{doc_id}:{number_}", contents, "", number)


_DOCNO = re.compile(r"<DOCNO>\s*(.*?)\s*</DOCNO>", re.S)
_URL = re.compile(r"<DOCHDR>\s*(\S*)", re.S)
_PASSAGE = re.compile(r"<PASSAGE id=\"?(\d+)\"?>(.*?)</PASSAGE>", re.S)


def read_trecweb(path: Path, stats: ReadStats, split: Splitter = rule_splitter) -> Iterator[Passage]:
    with open_text(path) as handle:
        buffer: list[str] = []
        start = 0
        for number, line in enumerate(handle, start=1):
            if line.strip() == "<DOC>":
                buffer, start = [], number
            buffer.append(line)
            if line.strip() == "</DOC>":
                body = "".join(buffer)
                docno, url = _DOCNO.search(body), _URL.search(body)
                passages = _PASSAGE.findall(body)
                if not docno or not passages:
                    stats.skip(path, start, "a <DOC> needs <DOCNO> and at least one <PASSAGE id=N>")
                    continue
                stats.documents += 1
                for number_, text in passages:
                    yield Passage(f"{docno.group(1)}:{number_}", " ".join(text.split()), url.group(1) if url else "",
                                  start)


def read_car(path: Path, stats: ReadStats, split: Splitter = rule_splitter) -> Iterator[Passage]:
    from trec_car.read_data import iter_paragraphs

    with open_binary(path) as handle:
        for number, paragraph in enumerate(iter_paragraphs(handle), start=1):
            text = paragraph.get_text()
            if not text.strip():
                stats.skip(path, number, "empty paragraph")
                continue
            stats.documents += 1
            yield Passage(paragraph.para_id, text, "", number)


def read_msmarco(path: Path, stats: ReadStats, split: Splitter = rule_splitter) -> Iterator[Passage]:
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2 or not parts[0] or not parts[1].strip():
                stats.skip(path, number, "expected 'id<TAB>text'")
                continue
            stats.documents += 1
            yield Passage(parts[0], parts[1], "", number)


READERS: dict[str, Callable[[Path, ReadStats, Splitter], Iterator[Passage]]] = {
    "clueweb22": read_clueweb22, "jsonl": read_jsonl, "provenance": read_provenance, "trecweb": read_trecweb,
    "car": read_car,
    "msmarco": read_msmarco}


def detect_format(path: Path) -> str:
    """Guess a file's format from its name and first line."""
    name = path.name.lower()
    if name.endswith((".cbor", ".cbor.gz")) or "paragraphs" in name:
        return "car"
    if name.endswith((".tsv", ".tsv.gz")):
        return "msmarco"
    try:
        with open_text(path) as handle:
            first = next((line for line in handle if line.strip()), "")
    except OSError as err:
        raise IkatError(f"cannot read its first record ({type(err).__name__}: {err})", path=path,
                        fix="check that the file is complete") from err
    if first.strip().startswith("<DOC>"):
        return "trecweb"
    if first.lstrip().startswith("{"):
        try:
            record = json.loads(first)
        except json.JSONDecodeError:
            record = {}
        if "ClueWeb22-ID" in record:
            return "clueweb22"
        if "id" in record and "contents" in record:
            return "jsonl"
        if {"doc_id", "passage_id", "passage_text"} <= set(record):
            return "provenance"
    raise IkatError("cannot tell the collection format", path=path,
                    fix=f"pass --format, one of {FORMATS} (passage JSONL needs 'id' and 'contents'; provenance "
                        "passages 'doc_id', 'passage_id' and 'passage_text')")


def passage_texts(paths: Iterable[str | Path]) -> dict[str, str]:
    """Passage texts by id from passage JSONL files, ``{"id", "contents"}`` (``jsonl``) or the organizers'
    ``{"doc_id", "passage_id", "passage_text"}`` (``provenance``), read by their collection readers; the first text
    of an id wins. A line that is not a passage is an error naming its file and line."""
    texts: dict[str, str] = {}
    for path in map(Path, paths):
        fmt = detect_format(path)
        if fmt not in ("jsonl", "provenance"):
            raise IkatError(f"expected passage JSON lines, found {fmt}", path=path,
                            fix='lines like {"doc_id", "passage_id", "passage_text"} or {"id", "contents"}')
        stats = ReadStats()
        for passage in READERS[fmt](path, stats, rule_splitter):
            texts.setdefault(passage.id, passage.contents)
        if stats.problems:
            where, _, reason = stats.problems[0].removeprefix(f"{path}:").partition(": ")
            raise IkatError(f"{reason} ({stats.skipped} such lines)", path=path, where=f"line {where}",
                            fix='lines like {"doc_id", "passage_id", "passage_text"} or {"id", "contents"}')
    return texts


def input_files(inputs: Iterable[str | Path]) -> list[Path]:
    """Files named, and the record files inside folders named, sorted for a stable order."""
    files: list[Path] = []
    for item in map(Path, inputs):
        if item.is_dir():
            files.extend(sorted(p for p in item.rglob("*") if p.is_file() and not p.name.startswith(".")
                                and p.name.endswith((".json", ".jsonl", ".json.gz", ".jsonl.gz", ".tsv", ".tsv.gz",
                                                     ".trecweb", ".trecweb.gz", ".cbor", ".xml", ".xml.gz"))))
        elif item.is_file():
            files.append(item)
        else:
            raise IkatError("input not found", path=item, fix="pass collection files or folders that exist")
    if not files:
        raise IkatError(f"no collection files in {[str(i) for i in inputs]}", fix="pass the collection's files")
    return files


def read_passages(path: Path, fmt: str, stats: ReadStats, split: Splitter = rule_splitter) -> Iterator[Passage]:
    """Passages of one file in ``fmt`` (``auto`` detects it); passages with blank text are skipped."""
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt not in READERS:
        raise IkatError(f"unknown format {fmt!r}", fix=f"use one of {FORMATS}")
    return _counted(path, READERS[fmt](path, stats, split), stats)


def _counted(path: Path, passages: Iterator[Passage], stats: ReadStats) -> Iterator[Passage]:
    for passage in passages:
        if passage.contents.strip(_BLANK):
            stats.passages += 1
            yield passage
        else:
            stats.skip(path, passage.line, "blank passage text")
