"""A learned sparse (SPLADE) index: passages encoded on Ray into quantized term weights, then a Lucene impact index
built by Anserini from them.

The folder ``out`` holds, in the order they are made:

- ``texts/NNNNN.parquet``: the passages in shards of ``shard_size``, read as ``index dense`` reads them
  (:func:`ikatkit.index.dense.read_source`); ``work.json`` fingerprints what changes the vectors, the batch size
  too (a job begun at one is refused at another, naming the ``--batch-size`` to resume with);
- ``vectors/NNNNN.jsonl.gz``: Anserini's ``JsonVectorCollection`` (``{"id", "contents", "vector": {term:
  weight}}``), the weights quantized as :data:`ikatkit.index.splade.QUANTIZATION` says. Encoder actors on the Ray
  pipeline of ``index dense`` (:func:`ikatkit.index.dense.encoded_batches`) encode the shards not yet written, a
  chunk of a shard a call (``PASSES_PER_CALL`` batches on a CPU); a complete shard is renamed into place, so a killed
  job resumes with the others and ends with the vectors of an uninterrupted one;
- the Lucene index itself (``segments_N``...): Anserini's ``IndexCollection -impact -pretokenized`` (a term's
  weight is its frequency, scored by ``ImpactSimilarity``), the raw JSON stored so that ``index get``/``verify`` and
  passage texts work as for a BM25 index; built by ``ImpactIndexer.java`` where a JDK compiles ikatkit's Java helpers
  (the same index: each term given once with its weight as the frequency, where Anserini writes it weight times into
  a text it tokenizes), else by Anserini; in a work folder, its files moved in when complete;
- ``manifest.json``, last: ``kind = "sparse"``, model, quantization, counts.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.atomic import write_json
from ikatkit.errors import IkatError
from ikatkit.index.build import MANIFEST, default_threads
from ikatkit.index.dense import (GPU_ROWS_PER_CALL, SHARD_SIZE, claim_work, encoded_batches, pending_shards,
                                 read_source, write_texts)
from ikatkit.index.splade import DEFAULT_MODEL, PASSAGE_LENGTH, QUANTIZATION, SCALE
from ikatkit.java import anserini_jar

KIND = "sparse"
ANSERINI_OPTIONS = ("-impact", "-pretokenized", "-storeRaw")
IMPACT_INDEXER = "ikatkit.ImpactIndexer"  # IndexCollection's impact index, each term given once (ImpactIndexer.java)
INDEX_COLLECTION = "io.anserini.index.IndexCollection"
BUILDERS = ("terms", "anserini")  # who builds the impact index (impact_builder): ImpactIndexer, IndexCollection
PASSES_PER_CALL = 8  # forward passes of --batch-size a CPU actor makes per Ray call: a progress step (GPU_ROWS_PER_CALL
# passages on a GPU)


class _EncodeVectors:
    """A Ray Data actor: each passage of a batch as its ``JsonVectorCollection`` line (``line``), with ``shard``
    and ``row``."""

    def __init__(self, model: str, threads: int, batch_size: int, gpus: int, dtype: str = "auto") -> None:
        from ikatkit.index.splade import SpladeEncoder

        self.encoder = SpladeEncoder(model, "cuda" if gpus else None, threads, dtype)
        self.batch_size = batch_size

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        vectors = self.encoder.encode(texts, self.batch_size)
        lines = [json.dumps({"id": str(pid), "contents": text, "vector": vector}, ensure_ascii=False)
                 for pid, text, vector in zip(batch["id"], texts, vectors)]
        return {"shard": batch["shard"], "row": batch["row"], "line": np.array(lines, dtype=object)}


def encode_vectors(texts: Path, vectors: Path, sizes: list[int], encoder: dict[str, Any], ray: Any, workers: int,
                   threads: int, gpus: int, progress: Callable[[int], None] | None = None) -> None:
    """Encode the text shards whose vector shard is missing; ``progress(passages)`` after each batch the actors
    return (a shard is written when whole)."""
    pending = pending_shards(vectors, len(sizes), ".jsonl.gz")
    if not pending:
        return
    open_shards: dict[int, list[str]] = {}
    filled: dict[int, int] = {}
    # a call's texts (a chunk of one shard, cut from the shard's start) are batched by length within the chunk alone, so
    # a resumed job encodes each shard in the batches an uninterrupted one does (padding changes floats in the last
    # bits, and a rounding)
    rows = GPU_ROWS_PER_CALL if gpus else PASSES_PER_CALL * encoder["batch_size"]
    for batch in encoded_batches(texts, sizes, pending, _EncodeVectors, dict(encoder, threads=threads, gpus=gpus), ray,
                                 workers, threads, gpus, rows):
        for shard, row, line in zip(batch["shard"].tolist(), batch["row"].tolist(), batch["line"]):
            lines = open_shards.setdefault(shard, [""] * sizes[shard])
            lines[row] = str(line)
            filled[shard] = filled.get(shard, 0) + 1
            if filled[shard] == sizes[shard]:
                tmp = vectors / f".{shard:05d}.jsonl.gz.tmp"
                with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as handle:
                    handle.writelines(f"{found}\n" for found in lines)
                os.replace(tmp, vectors / f"{shard:05d}.jsonl.gz")
                del open_shards[shard]
        if progress:
            progress(len(batch["shard"]))
    if open_shards:
        raise IkatError(f"Ray returned too few vectors for shards {sorted(open_shards)}", path=vectors,
                        fix="run the same command again: finished shards are kept")


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


def _index_vectors(vectors: Path, out: Path, passages: int, threads: int, heap: str) -> str:
    """The impact index of the vector shards, built beside ``out`` and its files moved into ``out`` by
    :func:`impact_builder`'s automatic choice; the class that built it."""
    from ikatkit.index.anserini import Anserini

    for stale in out.glob(".lucene-*"):
        shutil.rmtree(stale, ignore_errors=True)
    work = out / f".lucene-{os.getpid()}"
    helpers, main = impact_builder()
    try:
        with Anserini(vectors, work, threads, heap, out, "JsonVectorCollection", helpers, options=ANSERINI_OPTIONS,
                      main=main) as anserini:
            anserini.wait(passages)
        for path in sorted(work.iterdir(), key=lambda p: p.name.startswith("segments")):  # the commit last
            if path.name != "write.lock":
                os.replace(path, out / path.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return main


def read_manifest(path: str | Path) -> dict[str, Any] | None:
    """The manifest of a finished sparse index at ``path``, else None."""
    found = Path(path) / MANIFEST
    manifest = json.loads(found.read_text(encoding="utf-8")) if found.exists() else {}
    return manifest if manifest.get("kind") == KIND else None


def build_sparse(inputs: Sequence[str | Path], out: str | Path, *, model: str = DEFAULT_MODEL,
                 ray_address: str | None = None, batch_size: int = 8, shard_size: int = SHARD_SIZE,
                 threads: int = 1, workers: int | None = None, index_threads: int | None = None, heap: str = "4g",
                 fmt: str = "auto", splitter: str = "auto", dtype: str = "auto",
                 progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Encode the passages of ``inputs`` (a Lucene index or collection files) with SPLADE model ``model`` into
    ``out`` on ``workers`` Ray actors (default: one per GPU, else one per ``threads`` CPUs) in ``dtype`` (``auto``:
    float32; bfloat16, float16 on GPUs: options, their weights near float32's, not equal), then
    index them with Anserini on ``index_threads`` threads; returns the manifest (a finished index is left as it
    is)."""
    from ikatkit.index.splade import load_splade
    from ikatkit.placement import decide, ray_machine
    from ikatkit.raycluster import connect, resources

    out = Path(out)
    started = time.time()
    finished = read_manifest(out)
    if finished is not None:
        return finished
    work = out / "work.json"
    if not work.exists() and out.exists() and any(out.iterdir()):
        raise IkatError("the output folder exists and is not a sparse index", path=out, fix="choose another --out")
    source, passages = read_source(inputs, fmt, splitter)  # inputs checked before the model loads and Ray starts
    tokenizer, loaded = load_splade(model)
    ray = connect(ray_address)
    cpus, gpus = resources(ray)
    placement = decide("splade", ray_machine(gpus), dtype)  # the actors'
    # the batch size too: padding within a batch moves floats in the last bits, and a quantized weight by 1
    fingerprint = {"source": source, "model": model, "shard_size": shard_size, "max_length": PASSAGE_LENGTH,
                   "quantization": QUANTIZATION, "vocabulary": int(loaded.config.vocab_size),
                   "batch_size": batch_size, "placement": placement.identity(),
                   "versions": {name: metadata.version(name) for name in ("transformers", "torch")}}
    del tokenizer, loaded
    claim_work(out, fingerprint, "sparse index", {"batch_size": "--batch-size"})
    sizes = write_texts(passages, out / "texts", shard_size)
    workers = workers or max(1, gpus if gpus else cpus // threads)
    encoder = {"model": model, "batch_size": batch_size, "dtype": placement.dtype}
    encode_vectors(out / "texts", out / "vectors", sizes, encoder, ray, workers, threads, gpus, progress)
    index_threads = index_threads or default_threads()
    indexer = _index_vectors(out / "vectors", out, sum(sizes), index_threads, heap)
    manifest = {
        "kind": KIND,
        "model": model,
        "scoring": "impact: sum over shared terms of query weight x passage weight (Anserini's ImpactSimilarity)",
        "quantization": QUANTIZATION,
        "scale": SCALE,
        "max_length": PASSAGE_LENGTH,
        "placement": placement.identity(),
        "counts": {"passages": sum(sizes), "shards": len(sizes)},
        "shard_size": shard_size,
        "source": source,
        "parameters": {"batch_size": batch_size, "threads_per_worker": threads, "workers": workers,
                       "index_threads": index_threads, "heap": heap, "anserini": list(ANSERINI_OPTIONS),
                       "indexer": indexer,
                       "ray": ray_address or "local", "cluster": {"cpus": cpus, "gpus": gpus}},
        "versions": {name: metadata.version(name) for name in ("ikatkit", "transformers", "torch", "pyserini",
                                                               "ray")},
        "anserini_jar": anserini_jar().name,
        "seconds": round(time.time() - started, 2),
        "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_json(out / MANIFEST, manifest)
    return manifest
