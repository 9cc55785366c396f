"""Build a Lucene BM25 index and its manifest: the inputs' sizes and hashes, counts, parameters and versions.

The passages are fed to Anserini as :mod:`ikatkit.index.indexing` describes. One build writes an index at a time
(``.NAME.lock`` beside it, :mod:`ikatkit.lock`). The index is built in a work folder beside ``out`` and renamed
when complete; ``manifest.json`` is written last (:mod:`ikatkit.index.manifest`, kind ``bm25``), so an interrupted
build never looks finished. A build over a finished index of the same inputs (paths, sizes, format and splitter) is a
no-op; other inputs are refused, naming the fix (another ``--out``, or ``rebuild``: the new index replaces the old
once built). A stopped build (Ctrl-C, SIGTERM: :mod:`ikatkit.stopping`) stops Anserini and the
segmenters and removes its work folder on the way out; one killed outright leaves it to the next build.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ikatkit.collection.readers import detect_format, input_files
from ikatkit.collection.segment import resolve_splitter
from ikatkit.errors import IkatError
from ikatkit.index.anserini import default_threads
from ikatkit.index.indexing import OnProgress, index_in_java, index_in_python, quiet, segment_in_java, total
from ikatkit.index.manifest import BM25, MANIFEST, finished, write_manifest
from ikatkit.java import anserini_jar
from ikatkit.lock import index_lock


@contextmanager
def _work_folder(out: Path) -> Iterator[Path]:
    """A fresh folder beside ``out`` while holding the index's lock (those of builds killed outright are
    removed), removed at the end, on an error and on a stop."""
    with index_lock(out):
        for stale in out.parent.glob(f".{out.name}.building-*"):
            shutil.rmtree(stale, ignore_errors=True)
        work = out.parent / f".{out.name}.building-{os.getpid()}"
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)


def same_inputs(manifest: dict[str, Any], files: list[Path], fmt: str, splitter: str) -> list[str]:
    """What differs between a finished index's inputs and these (paths and sizes, format and splitter options)."""
    before = [(str(Path(s["path"]).resolve()), s["bytes"]) for s in manifest.get("sources", [])]
    now = [(str(f.resolve()), f.stat().st_size) for f in files]
    parameters = manifest.get("parameters", {})
    differ = []
    if sorted(before) != sorted(now):
        differ.append(f"built from {len(before)} file(s) of {sum(b for _, b in before):,} bytes, given {len(now)} of "
                      f"{sum(b for _, b in now):,}" + (" at other paths" if len(before) == len(now) else ""))
    if parameters.get("format_option", fmt) != fmt:
        differ.append(f"--format {parameters['format_option']}, now {fmt}")
    if parameters.get("splitter_option", splitter) != splitter:
        differ.append(f"--splitter {parameters['splitter_option']}, now {splitter}")
    return differ


def build_index(inputs: Iterable[str | Path], out: str | Path, *, fmt: str = "auto", threads: int | None = None,
                shards: int | None = None, splitter: str = "auto", heap: str = "4g",
                segmenter: str = "auto", progress: OnProgress = quiet, rebuild: bool = False) -> dict[str, Any]:
    """Index the passages of ``inputs`` into ``out``; returns the manifest (the existing one if already built from
    the same inputs; other inputs are refused unless ``rebuild``, when the new index replaces it once built).

    Anserini indexes with ``threads`` threads (default: CPU cores, at most 8). ClueWeb22 records with the rule
    splitter are segmented in those threads by our Java collection (``segmenter`` java, or auto given at least
    ``threads`` files) when a JDK compiles it; otherwise ``shards`` (default and at most ``threads``) named
    pipes, one per thread, are fed by as many segmenter processes, at most one per input file. These are
    spawned: a script calling this needs the ``if __name__ == "__main__":`` guard. ``progress(what, done, total)``
    is told the passages segmented or files indexed so far.
    """
    out = Path(out)
    files = input_files(inputs)
    done = finished(out, BM25)
    if done is not None:
        differ = same_inputs(done, files, fmt, splitter)
        if not differ:
            return done
        if not rebuild:
            raise IkatError(f"this folder holds an index of other inputs ({'; '.join(differ)}; "
                            f"{done['counts']['passages']} passages)", path=out,
                            fix="choose a new --out, or pass --rebuild to replace it")
    elif out.exists() and any(out.iterdir()):
        raise IkatError("the output folder exists, is not empty and has no manifest", path=out,
                        fix="remove it (an interrupted build?) or choose another --out")
    threads = threads or default_threads()
    shards = min(shards or threads, threads)
    started = time.time()
    helpers = segment_in_java(files, fmt, splitter, segmenter, threads)
    formats = [detect_format(path) if fmt == "auto" else fmt for path in files]
    used = resolve_splitter(splitter) if "clueweb22" in formats else None  # only raw records are split
    with _work_folder(out) as work:
        if done is None and (out / MANIFEST).exists():  # built by another process while this one waited to start
            return finished(out, BM25) or {}
        if helpers:
            reports = index_in_java(files, work, threads, heap, out, helpers, progress)
        else:
            reports = index_in_python(files, fmt, used or "rule", work, threads, shards, heap, out, progress)
        stats = total(reports)
        if stats.passages == 0:
            raise IkatError(f"no passages read ({stats.skipped} records skipped: {stats.problems[:3]})",
                            fix="check the input format (--format)")
        parameters = {"threads": threads, "segmenter": "java" if helpers else "python",
                      "shards": None if helpers else shards, "heap": heap,
                      "splitter": used, "splitter_option": splitter,  # used: None when nothing was split
                      "format_option": fmt, "store": ["positions", "docvectors", "raw"]}
        if out.exists():  # an empty folder, or the index a rebuild replaces (removed once the new one is in place)
            os.replace(out, work / "replaced")
        os.replace(work / "index", out)
        manifest = write_manifest(
            out, BM25, started,
            sources=[{"path": str(files[r.index]), "format": formats[r.index], "bytes": r.bytes, "sha256": r.sha256}
                     for r in reports],
            format="+".join(sorted(set(formats))),  # as detected (--format auto) or given
            counts={"documents": stats.documents, "passages": stats.passages, "skipped": stats.skipped},
            skipped_examples=stats.problems, parameters=parameters, versions=("pyserini",),
            anserini_jar=anserini_jar().name)
    return manifest
