"""A dense index: passages encoded on Ray into float16 shards, then a faiss index over them.

The folder ``out`` holds, in the order they are made:

- ``texts/NNNNN.parquet`` and ``work.json``: the collection-encoding job's (:mod:`ikatkit.index.job`); the
  fingerprint covers what changes the embeddings (source, model, backend, shard size, sequence length, ``--dtype``:
  by default float16 on GPUs and float32 on CPUs);
- ``embeddings/NNNNN.npy``: float16, unit-length rows in the shard's order, encoded by the job's Ray actors a chunk of
  a shard a call (``ROWS_PER_CALL`` passages, ``GPU_ROWS_PER_CALL`` on a GPU, in batches of at least ``GPU_BATCH``
  there) and written into the shard's memmap as they return; a complete shard is renamed into place;
- ``index.faiss`` (row i = the i-th passage in shard order, the id map being the texts' ``id`` column) and
  ``manifest.json``, written last (:mod:`ikatkit.index.manifest`): model, dimension, normalisation, faiss spec, the
  placement the actors ran with, counts.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.index import job
from ikatkit.index.manifest import DENSE, finished, write_manifest
from ikatkit.index.texts import TextsFunction

FLAT_LIMIT = 1_000_000  # auto: exact search up to this many passages, IVF-PQ above
TRAIN_LIMIT = 1_000_000  # vectors sampled to train an IVF or PQ index
ROWS_PER_CALL = 256  # passages an encoder actor embeds per Ray Data batch
GPU_ROWS_PER_CALL = 8192  # the same on a GPU: enough batches for its tokenizing thread to work ahead
NORMALISATION = "l2: unit-length embeddings, inner product = cosine"


class _EncodeBatches(job.EncoderActor):
    """Each passage of a batch as its float16 embedding (``vector``)."""

    def __init__(self, model: str, backend: str, threads: int, batch_size: int, dtype: str = "auto") -> None:
        from ikatkit.index.encode import GPU_BATCH, DenseEncoder

        self.encoder = DenseEncoder(model, backend, threads, dtype=dtype)
        self.batch_size = batch_size if self.encoder.placement.device == "cpu" else max(batch_size, GPU_BATCH)

    def encode(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self.encoder.encode([str(t) for t in batch["text"]], self.batch_size)
        return {"vector": vectors.astype(np.float16)}


class _EmbeddingShard:
    """A shard's float16 embeddings, written into its memmap as they return."""

    def __init__(self, number: int, size: int, path: Path, dimension: int) -> None:
        self.memmap = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(size, dimension))

    def put(self, rows: np.ndarray, batch: dict[str, np.ndarray], mine: np.ndarray) -> None:
        self.memmap[rows] = batch["vector"][mine]

    def commit(self) -> None:
        self.memmap.flush()
        del self.memmap


def auto_spec(passages: int, dimension: int) -> str:
    """Flat up to FLAT_LIMIT passages; above, IVF with about 4 sqrt(n) lists and PQ of dimension / 8 bytes."""
    if passages <= FLAT_LIMIT:
        return "Flat"
    lists = 2 ** round(math.log2(4 * math.sqrt(passages)))
    return f"IVF{lists},PQ{dimension // 8}"


def build_faiss(shards: list[Path], dimension: int, spec: str, target: Path, seed: int = 0) -> int:
    """A faiss index (inner product) from float16 shards, trained on a random sample when it needs training;
    written atomically to ``target``; returns the vectors added."""
    import faiss

    try:
        index = faiss.index_factory(dimension, spec, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as err:
        raise IkatError(f"invalid faiss spec {spec!r}: {str(err).strip().splitlines()[-1]}",
                        fix="use a faiss index_factory string: Flat, HNSW32, IVF4096,PQ48, ...") from None
    arrays = [np.load(path, mmap_mode="r") for path in shards]
    total = sum(len(a) for a in arrays)
    if not index.is_trained:
        rows = np.sort(np.random.default_rng(seed).choice(total, size=min(total, TRAIN_LIMIT), replace=False))
        starts = np.cumsum([0] + [len(a) for a in arrays])
        sample = np.concatenate([arrays[i][rows[(rows >= starts[i]) & (rows < starts[i + 1])] - starts[i]]
                                 for i in range(len(arrays))]).astype(np.float32)
        index.train(sample)
        del sample
    for array in arrays:
        for start in range(0, len(array), 65536):
            index.add(np.ascontiguousarray(array[start:start + 65536], dtype=np.float32))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        faiss.write_index(index, str(tmp))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return total


def build_dense(inputs: Sequence[str | Path], out: str | Path, *, model: str = "bundled:minilm",
                ray_address: str | None = None, batch_size: int = 32, faiss_spec: str = "auto",
                backend: str = "auto", shard_size: int = job.SHARD_SIZE, threads: int = 1, workers: int | None = None,
                fmt: str = "auto", splitter: str = "auto", dtype: str = "auto",
                progress: job.Steps | None = None) -> dict[str, Any]:
    """Encode the passages of ``inputs`` (a Lucene index or collection files) into ``out`` on ``workers`` Ray
    actors (default: one per GPU, else one per ``threads`` CPUs) in ``dtype`` (``auto``: the placement's, float32
    on CPUs and float16 on GPUs) and index them with faiss; returns the manifest. A finished index with the same
    faiss spec is left as it is; another spec re-indexes the kept embeddings."""
    from ikatkit.index.encode import choose_backend, compile_openvino
    from ikatkit.models import load_sentence_transformer
    from ikatkit.raycluster import connect, resources

    out = Path(out)
    started = time.time()
    done = finished(out, DENSE)
    if done is not None and faiss_spec in ("auto", done["faiss"]):
        return done
    job.start(out, DENSE)
    steps = progress or job.Unwatched()
    steps.now("reading the inputs")
    source, passages = job.read_source(inputs, fmt, splitter)  # inputs checked before the model loads and Ray starts
    steps.now(f"loading {model}")
    loaded = load_sentence_transformer(model, device="cpu")
    steps.now("starting Ray")
    ray = connect(ray_address)
    cpus, gpus = resources(ray)
    job.check_dtype("encoder", dtype, gpus)
    half = gpus or dtype not in ("auto", "float32")  # the actors' placement (float16 on GPUs by default)
    if half and backend == "openvino":
        raise IkatError("the OpenVINO backend encodes on the CPU in float32", fix="use --backend torch (or auto), "
                        "or --dtype float32 on CPUs")
    backend = "torch" if half and backend == "auto" else choose_backend(backend, loaded)
    fingerprint = {"source": source, "model": model, "backend": backend, "shard_size": shard_size,
                   "max_seq_length": loaded.max_seq_length, "normalisation": NORMALISATION, "dtype": dtype,
                   "versions": {name: metadata.version(name) for name in ("sentence-transformers", "torch")}}
    job.claim_work(out, fingerprint, "dense index", {"dtype": "--dtype"})
    steps.now("writing the passages' text shards")
    sizes = job.write_texts(passages, out / "texts", shard_size)
    dimension = int(loaded.get_embedding_dimension())
    if backend == "openvino":  # converted here once, checked, and found in the cache by the workers of this node
        compile_openvino(loaded)
    encoder = {"model": model, "backend": backend, "batch_size": batch_size, "dtype": dtype, "threads": threads}
    workers = job.workers_for(workers, cpus, gpus, threads)
    placement = job.encode_pending(out, "embeddings", ".npy", sizes,
                                   lambda n, size, path: _EmbeddingShard(n, size, path, dimension), _EncodeBatches,
                                   encoder, ray, workers, threads, gpus, GPU_ROWS_PER_CALL if gpus else ROWS_PER_CALL,
                                   "dense index", steps)
    spec = auto_spec(sum(sizes), dimension) if faiss_spec == "auto" else faiss_spec
    shards = [out / "embeddings" / f"{n:05d}.npy" for n in range(len(sizes))]
    steps.now(f"building the faiss index ({spec})")
    added = build_faiss(shards, dimension, spec, out / "index.faiss")
    return write_manifest(
        out, DENSE, started, model=model, backend=backend, placement=placement, dimension=dimension,
        normalisation=NORMALISATION, max_seq_length=loaded.max_seq_length, faiss=spec, metric="inner_product",
        counts={"passages": added, "shards": len(sizes)}, shard_size=shard_size,
        id_map="texts/NNNNN.parquet column id, shards in order: faiss row i = i-th passage", source=source,
        parameters={"batch_size": batch_size, "dtype": dtype, "threads_per_worker": threads, "workers": workers,
                    "ray": ray_address or "local", "cluster": {"cpus": cpus, "gpus": gpus}},
        versions=("sentence-transformers", "torch", "faiss-cpu", "ray"))


def stored_texts(path: Path, manifest: dict[str, Any], lucene: str | Path | None = None) -> TextsFunction:
    """``texts(ids)`` of a dense index's passages: from the Lucene index it was encoded from (or ``lucene``) where
    that stores them, else from its own text shards; each text read once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ikatkit.index.lucene import is_lucene_folder, lucene_info
    from ikatkit.index.texts import LuceneTexts, ShardTexts

    source = lucene or (manifest.get("source") or {}).get("lucene")
    store: Any
    if source and is_lucene_folder(source) and lucene_info(source).text_field is not None:
        store = LuceneTexts(source)
    else:
        shards = job.text_shards(path / "texts")
        ids = pa.chunked_array([pq.read_table(s, columns=["id"]).column("id") for s in shards]).combine_chunks()
        store = ShardTexts(shards, ids, manifest["shard_size"])
    found: dict[str, str] = {}

    def texts(wanted: Sequence[str]) -> dict[str, str]:
        missing = [pid for pid in dict.fromkeys(wanted) if pid not in found]
        if missing:
            found.update(store.texts(missing))
        return {pid: found[pid] for pid in wanted if pid in found}

    return texts
