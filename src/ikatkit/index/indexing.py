"""The two ways of feeding Anserini a collection's passages, each reporting every input file.

Raw ClueWeb22 records with the rule splitter are segmented inside Anserini's indexing threads by our Java
collection (``IkatClueWeb22Collection.java``: the rule splitter written again in Java, tested to make the
Python segmenter's passages), so no passage JSONL is written and parsed again; it reports each file's counts
and skipped records and writes the id hashes for the duplicate check. Otherwise (other formats, spaCy, no JDK)
segmenter processes (as many as shards, at most one per input file: split a huge file to read it in
parallel) write passage JSONL into named pipes, the shards, that Anserini's IndexCollection, started at the
same time with a thread per shard, reads as they are written: segmentation and indexing overlap and nothing
is staged on disk but 16 bytes per passage for the duplicate-id check, which runs in memory flat in the
collection's size (``ikatkit.index.dupes``) once segmentation ends; Anserini must report indexed every
passage segmented.

Progress goes to a ``progress(what, done, total)`` callback (``what``: passages or files; ``total`` None when
unknown); printing it is the caller's (``ikatkit index build`` prints it).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ikatkit.collection.readers import ReadStats, detect_format
from ikatkit.collection.segment import rule_splitter
from ikatkit.collection.segment import splitter as splitter_function
from ikatkit.errors import IkatError
from ikatkit.index.anserini import Anserini
from ikatkit.index.dupes import check_unique
from ikatkit.index.segmenters import FileReport, Segmenters, Task, file_sha256, shard_path
from ikatkit.java import helper_classes
from ikatkit.textfile import compression

SEGMENTERS = ("auto", "java", "python")
JAVA_COLLECTION = "IkatClueWeb22Collection"  # src/ikatkit/index/IkatClueWeb22Collection.java
OnProgress = Callable[[str, int, "int | None"], None]


def quiet(what: str, done: int, total: int | None) -> None:
    """No progress shown (the library's default)."""


def segment_into(files: Sequence[Path], fmt: str, splitter: str, folder: Path, shards: int, scratch: Path,
                 reader_alive: Callable[[], bool] = lambda: True, progress: OnProgress = quiet) -> list[FileReport]:
    """Segment ``files`` into ``shards`` shards in ``folder`` (existing named pipes, else regular files);
    per-file reports. Fails on a segmenter's error or a duplicate passage id."""
    hashes = scratch / "hashes"
    with Segmenters(Task(tuple(files), fmt, splitter, folder, shards, hashes)) as segmenters:
        reports = segmenters.wait(lambda done: progress("passages", done, None), reader_alive)
    check_unique(hashes, files, fmt, splitter)
    shutil.rmtree(hashes)
    return reports


def segment_in_java(files: Sequence[Path], fmt: str, splitter: str, segmenter: str, threads: int) -> Path | None:
    """Our compiled Java helpers when Anserini's threads segment the records themselves (``segmenter`` java, or
    auto with at least as many files as threads, since a thread reads one file at a time; ClueWeb22 records,
    the rule splitter, a JDK's javac), else None (Python segmenter processes, which feed every thread)."""
    if segmenter not in SEGMENTERS:
        raise IkatError(f"unknown segmenter {segmenter!r}", fix=f"use one of {SEGMENTERS}")
    if segmenter == "python" or (segmenter == "auto" and len(files) < threads):
        return None
    possible = splitter_function(splitter) is rule_splitter and all(
        (detect_format(path) if fmt == "auto" else fmt) == "clueweb22" for path in files)
    helpers = helper_classes() if possible else None
    if helpers is None and segmenter == "java":
        raise IkatError("the Java segmenter needs ClueWeb22 records, the rule splitter and a JDK's javac",
                        fix="use --segmenter python (or auto)")
    return helpers


def index_in_java(files: Sequence[Path], work: Path, threads: int, heap: str, out: Path,
                  helpers: Path, progress: OnProgress = quiet) -> list[FileReport]:
    """Index ClueWeb22 ``files`` with Anserini's threads segmenting them (``IkatClueWeb22Collection.java``)
    into ``work / "index"``; per-file reports. Fails on a file's error, a duplicate id or a count mismatch."""
    inputs, found, hashes = work / "inputs", work / "reports", work / "hashes"
    for folder in (inputs, found, hashes):
        folder.mkdir(parents=True)
    for number, path in enumerate(files):  # named by their number, which the Java side reports by
        gzipped = compression(path) == "gzip"  # by its bytes: a gzipped file without the suffix too
        (inputs / f"{number}{'.json.gz' if gzipped else '.json'}").symlink_to(path.resolve())
    properties = {"ikatkit.reports": found, "ikatkit.hashes": hashes}
    with Anserini(inputs, work / "index", threads, heap, out, JAVA_COLLECTION, helpers, properties) as anserini:
        digests = []
        for path in files:  # while Anserini indexes
            digests.append(file_sha256(path))
            progress("files", len(list(found.glob("*.json"))), len(files))
        while anserini.alive():
            time.sleep(0.2)
            progress("files", len(list(found.glob("*.json"))), len(files))
        indexed = anserini.ended()
        reports = [_java_report(found / f"{number}.json", number, path, digests[number])
                   for number, path in enumerate(files)]
        check_unique(hashes, files, "clueweb22", "rule")
        anserini.check(indexed, total(reports).passages)
    return reports


def _java_report(found: Path, number: int, path: Path, digest: tuple[int, str]) -> FileReport:
    if not found.exists():
        raise IkatError("Anserini's segmenter did not finish this file", path=path,
                        fix="see Anserini's messages above; --segmenter python segments in Python instead")
    report = json.loads(found.read_text(encoding="utf-8"))
    if report["error"]:
        raise IkatError(report["error"], path=path,
                        fix="check that the file is complete and UTF-8, and that the disk has space")
    stats = ReadStats(report["documents"], report["passages"], report["skipped"],
                      [f"{path}:{line}: {reason}" for line, reason in report["problems"]])
    return FileReport(number, stats, *digest)


def total(reports: list[FileReport]) -> ReadStats:
    """The reports' counts added up."""
    total = ReadStats()
    for report in reports:
        total.merge(report.stats)
    return total


def write_shards(files: Sequence[Path], fmt: str, folder: Path, shards: int, splitter: str = "auto") -> ReadStats:
    """Segment ``files`` into ``shards`` regular JSONL files in ``folder`` (what Anserini alone would read)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}.") as scratch:
        return total(segment_into(files, fmt, splitter, folder, shards, Path(scratch)))


def index_in_python(files: Sequence[Path], fmt: str, splitter: str, work: Path, threads: int, shards: int,
                    heap: str, out: Path, progress: OnProgress = quiet) -> list[FileReport]:
    """Index ``files`` into ``work / "index"`` with segmenter processes feeding Anserini through named pipes."""
    pipes = work / "pipes"
    pipes.mkdir(parents=True)
    for worker in range(shards):
        os.mkfifo(shard_path(pipes, worker))
    with Anserini(pipes, work / "index", threads, heap, out) as anserini:
        reports = segment_into(files, fmt, splitter, pipes, shards, work, anserini.alive, progress)
        anserini.wait(total(reports).passages)
    return reports
