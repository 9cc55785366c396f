"""A learned sparse (SPLADE) index: passages encoded on Ray into quantized term weights, then a Lucene impact index
built by Anserini from them.

The folder ``out`` holds, in the order they are made:

- ``texts/NNNNN.parquet`` and ``work.json``: the collection-encoding job's (:mod:`ikatkit.index.job`); the
  fingerprint covers what changes the vectors, the batch size and dtype too (a job begun at one is refused at
  another, naming the option and the value to resume with);
- ``vectors/NNNNN.jsonl.gz``: Anserini's ``JsonVectorCollection`` (``{"id", "contents", "vector": {term:
  weight}}``), the weights quantized as :data:`ikatkit.index.sparse_encoder.QUANTIZATION` says, encoded by the
  job's Ray actors a chunk of a shard a call (``PASSES_PER_CALL`` batches on a CPU); a killed job resumes with the
  shards not yet written and ends with the vectors of an uninterrupted one;
- the Lucene index itself (``segments_N``...): Anserini's ``IndexCollection -impact -pretokenized`` (a term's
  weight is its frequency, scored by ``ImpactSimilarity``), the raw JSON stored so that ``index get``/``verify`` and
  passage texts work as for a BM25 index; built by ``ImpactIndexer.java`` where a JDK compiles ikatkit's Java helpers
  (the same index: each term given once with its weight as the frequency, where Anserini writes it weight times into
  a text it tokenizes), else by Anserini; in a work folder, its files moved in when complete;
- ``manifest.json``, last (:mod:`ikatkit.index.manifest`): ``kind = "sparse"``, model, vocabulary, quantization,
  the placement the actors ran with, counts.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.index import job
from ikatkit.index.manifest import SPARSE, finished, write_manifest
from ikatkit.index.sparse_encoder import DEFAULT_MODEL, PASSAGE_LENGTH, QUANTIZATION, SCALE
from ikatkit.index.anserini import IMPACT_OPTIONS, build_impact_index, default_threads
from ikatkit.java import anserini_jar

GPU_ROWS_PER_CALL = 8192  # passages a GPU actor encodes per Ray call
PASSES_PER_CALL = 8  # forward passes of --batch-size a CPU actor makes per Ray call: a progress step


class _EncodeVectors(job.EncoderActor):
    """Each passage of a batch as its ``JsonVectorCollection`` line (``line``)."""

    def __init__(self, model: str, threads: int, batch_size: int, gpus: int, dtype: str = "auto") -> None:
        from ikatkit.index.sparse_encoder import SparseEncoder

        self.encoder = SparseEncoder(model, "cuda" if gpus else None, threads, dtype)
        self.batch_size = batch_size

    def encode(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        vectors = self.encoder.encode(texts, self.batch_size)
        lines = [json.dumps({"id": str(pid), "contents": text, "vector": vector}, ensure_ascii=False)
                 for pid, text, vector in zip(batch["id"], texts, vectors)]
        return {"line": np.array(lines, dtype=object)}


class _VectorShard:
    """A shard of ``JsonVectorCollection`` lines, gzipped into its file when whole."""

    def __init__(self, number: int, size: int, path: Path) -> None:
        self.lines, self.path = [""] * size, path

    def put(self, rows: np.ndarray, batch: dict[str, np.ndarray], mine: np.ndarray) -> None:
        for row, line in zip(rows.tolist(), batch["line"][mine]):
            self.lines[row] = str(line)

    def commit(self) -> None:
        with gzip.open(self.path, "wt", encoding="utf-8", compresslevel=1) as handle:
            handle.writelines(f"{line}\n" for line in self.lines)


def build_sparse(inputs: Sequence[str | Path], out: str | Path, *, model: str = DEFAULT_MODEL,
                 ray_address: str | None = None, batch_size: int = 8, shard_size: int = job.SHARD_SIZE,
                 threads: int = 1, workers: int | None = None, index_threads: int | None = None, heap: str = "4g",
                 fmt: str = "auto", splitter: str = "auto", dtype: str = "auto",
                 progress: job.Steps | None = None) -> dict[str, Any]:
    """Encode the passages of ``inputs`` (a Lucene index or collection files) with SPLADE model ``model`` into
    ``out`` on ``workers`` Ray actors (default: one per GPU, else one per ``threads`` CPUs) in ``dtype`` (``auto``:
    float32; bfloat16, float16 on GPUs: options, their weights near float32's, not equal), then
    index them with Anserini on ``index_threads`` threads; returns the manifest (a finished index is left as it
    is)."""
    from ikatkit.index.sparse_encoder import load_splade
    from ikatkit.raycluster import connect, resources

    out = Path(out)
    started = time.time()
    done = finished(out, SPARSE)
    if done is not None:
        return done
    job.start(out, SPARSE)
    steps = progress or job.Unwatched()
    steps.now("reading the inputs")
    source, passages = job.read_source(inputs, fmt, splitter)  # inputs checked before the model loads and Ray starts
    steps.now(f"loading {model}")
    tokenizer, loaded = load_splade(model)  # loads offline (one clear error), and its vocabulary is the index's
    vocabulary = int(loaded.config.vocab_size)
    del tokenizer, loaded
    steps.now("starting Ray")
    ray = connect(ray_address)
    cpus, gpus = resources(ray)
    job.check_dtype("splade", dtype, gpus)
    # the batch size and dtype too: padding within a batch moves floats in the last bits, and a quantized weight by 1
    fingerprint = {"source": source, "model": model, "shard_size": shard_size, "max_length": PASSAGE_LENGTH,
                   "quantization": QUANTIZATION, "vocabulary": vocabulary, "batch_size": batch_size, "dtype": dtype,
                   "versions": {name: metadata.version(name) for name in ("transformers", "torch")}}
    job.claim_work(out, fingerprint, "sparse index", {"batch_size": "--batch-size", "dtype": "--dtype"})
    steps.now("writing the passages' text shards")
    sizes = job.write_texts(passages, out / "texts", shard_size)
    workers = job.workers_for(workers, cpus, gpus, threads)
    # a call's texts (a chunk of one shard, cut from the shard's start) are batched by length within the chunk alone,
    # so a resumed job encodes each shard in the batches an uninterrupted one does
    rows = GPU_ROWS_PER_CALL if gpus else PASSES_PER_CALL * batch_size
    encoder = {"model": model, "batch_size": batch_size, "dtype": dtype, "threads": threads, "gpus": gpus}
    placement = job.encode_pending(out, "vectors", ".jsonl.gz", sizes, _VectorShard, _EncodeVectors, encoder, ray,
                                   workers, threads, gpus, rows, "sparse index", steps)
    index_threads = index_threads or default_threads()
    steps.now(f"building the impact index (Lucene, {index_threads} threads)")
    indexer = build_impact_index(out / "vectors", out, sum(sizes), index_threads, heap)
    return write_manifest(
        out, SPARSE, started, model=model, vocabulary=vocabulary,
        scoring="impact: sum over shared terms of query weight x passage weight (Anserini's ImpactSimilarity)",
        quantization=QUANTIZATION, scale=SCALE, max_length=PASSAGE_LENGTH, placement=placement,
        counts={"passages": sum(sizes), "shards": len(sizes)}, shard_size=shard_size, source=source,
        parameters={"batch_size": batch_size, "dtype": dtype, "threads_per_worker": threads, "workers": workers,
                    "index_threads": index_threads, "heap": heap, "anserini": list(IMPACT_OPTIONS),
                    "indexer": indexer, "ray": ray_address or "local", "cluster": {"cpus": cpus, "gpus": gpus}},
        versions=("transformers", "torch", "pyserini", "ray"), anserini_jar=anserini_jar().name)
