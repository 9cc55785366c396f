"""A dense index: passages encoded on Ray Data into float16 shards, then a faiss index over them.

The folder ``out`` holds, in the order they are made:

- ``texts/NNNNN.parquet``: the passages (``id``, ``text``, ``shard``, ``row``) in shards of ``shard_size``, read by
  this process from a Lucene index's stored texts or from collection files through the readers and segmenter of
  ``index build``; ``texts/_done.json`` marks them complete;
- ``embeddings/NNNNN.npy``: float16, unit-length rows in the shard's order. Ray Data reads the pending text shards,
  encoder actors (one per ``threads`` CPUs, or per GPU) embed them, and this process writes each batch into its
  shard's memmap; a complete shard is renamed into place, so a killed job resumes with the shards not yet
  finished, and no more than Ray's streaming window of embeddings is ever in memory;
- ``index.faiss`` (row i = the i-th passage in shard order, the id map being the texts' ``id`` column) and
  ``manifest.json``, written last: model, dimension, normalisation, faiss spec, counts.

``work.json`` fingerprints what changes the embeddings (source, model, backend, shard size, sequence length, the
actors' device and dtype: ``dtype``, by default float16 on GPUs and float32 on CPUs); a resumed job with other
settings is refused. An actor takes a chunk of a shard a call (``ROWS_PER_CALL`` passages, ``GPU_ROWS_PER_CALL`` on a
GPU, encoded in batches of at least ``GPU_BATCH`` there); ``progress`` hears of each call's passages as it returns.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.atomic import atomic_open, write_json
from ikatkit.errors import IkatError
from ikatkit.index.build import MANIFEST
from ikatkit.index.lucene import is_lucene_folder, open_index
from ikatkit.index.texts import index_records

SHARD_SIZE = 100_000
FLAT_LIMIT = 1_000_000  # auto: exact search up to this many passages, IVF-PQ above
TRAIN_LIMIT = 1_000_000  # vectors sampled to train an IVF or PQ index
ROWS_PER_CALL = 256  # passages an encoder actor embeds per Ray Data batch
GPU_ROWS_PER_CALL = 8192  # the same on a GPU: enough batches for its tokenizing thread to work ahead
NORMALISATION = "l2: unit-length embeddings, inner product = cosine"


def read_source(inputs: Sequence[str | Path], fmt: str = "auto",
                splitter: str = "auto") -> tuple[dict[str, Any], Iterator[tuple[str, str]]]:
    """A fingerprint of the source and its ``(id, text)`` passages: a Lucene index's stored texts in index
    order, or the passages ``index build`` would index from collection files."""
    paths = [Path(p) for p in inputs]
    if len(paths) == 1 and is_lucene_folder(paths[0]):
        info = open_index(paths[0])
        info.require_texts("encoding its passages")
        manifest = info.manifest or {}
        return ({"lucene": str(info.path), "built": manifest.get("built"), "counts": manifest.get("counts"),
                 **({} if info.own else {"commit": info.fingerprint})},
                ((r["id"], r["contents"]) for r in index_records(info.path, "encoding its passages")))
    from ikatkit.collection.readers import ReadStats, input_files, read_passages
    from ikatkit.collection.segment import splitter as splitter_function

    files = input_files(paths)
    split = splitter_function(splitter)

    def passages() -> Iterator[tuple[str, str]]:
        stats = ReadStats()
        for path in files:
            for passage in read_passages(path, fmt, stats, split):
                yield passage.id, passage.contents

    sources = [{"path": str(f.resolve()), "bytes": f.stat().st_size, "mtime_ns": f.stat().st_mtime_ns} for f in files]
    return {"files": sources, "format": fmt, "splitter": splitter}, passages()


def write_texts(passages: Iterator[tuple[str, str]], folder: Path, shard_size: int) -> list[int]:
    """The passages as parquet shards of ``shard_size`` in ``folder`` (shards already written are kept);
    the number of passages in each shard."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = folder / "_done.json"
    if done.exists():
        return json.loads(done.read_text(encoding="utf-8"))["sizes"]
    folder.mkdir(parents=True, exist_ok=True)
    sizes: list[int] = []
    ids: list[str] = []
    texts: list[str] = []

    def flush() -> None:
        path = folder / f"{len(sizes):05d}.parquet"
        if not path.exists():
            table = pa.table({"id": ids, "text": texts, "shard": pa.array([len(sizes)] * len(ids), pa.int32()),
                              "row": pa.array(range(len(ids)), pa.int32())})
            with atomic_open(path, "wb") as handle:
                pq.write_table(table, handle, compression="zstd")
        sizes.append(len(ids))
        ids.clear()
        texts.clear()

    for pid, text in passages:
        ids.append(pid)
        texts.append(text)
        if len(ids) == shard_size:
            flush()
    if ids:
        flush()
    if not sizes:
        raise IkatError("no passages read",
                        fix="check the input (a Lucene index storing its texts, or collection files)")
    write_json(done, {"passages": sum(sizes), "sizes": sizes})
    return sizes


_LAST_SHARD: dict[str, Any] = {}  # path -> table: a read task's last shard, its next chunk is read from memory


def _read_chunks(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Rows ``start:stop`` of the text shard at ``path``, for each row of ``batch``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for path, start, stop in zip(batch["path"].tolist(), batch["start"].tolist(), batch["stop"].tolist()):
        if path not in _LAST_SHARD:
            _LAST_SHARD.clear()
            _LAST_SHARD[path] = pq.read_table(path, columns=["id", "text", "shard", "row"])
        tables.append(_LAST_SHARD[path].slice(start, stop - start))
    table = pa.concat_tables(tables)
    return {name: table.column(name).to_numpy() for name in table.column_names}


class _EncodeBatches:
    """A Ray Data actor: embeds the ``text`` column of each batch, keeping ``shard`` and ``row``."""

    def __init__(self, model: str, backend: str, threads: int, batch_size: int, dtype: str = "auto") -> None:
        from ikatkit.index.encode import GPU_BATCH, Encoder

        self.encoder = Encoder(model, backend, threads, dtype=dtype)
        self.batch_size = batch_size if self.encoder.placement.device == "cpu" else max(batch_size, GPU_BATCH)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self.encoder.encode([str(t) for t in batch["text"]], self.batch_size)
        return {"shard": batch["shard"], "row": batch["row"], "vector": vectors.astype(np.float16)}


def encoded_batches(texts: Path, sizes: list[int], pending: list[int], actor: type, options: dict[str, Any], ray: Any,
                    workers: int, threads: int, gpus: int, rows: int) -> Iterator[dict[str, np.ndarray]]:
    """The batches ``actor(**options)`` makes of the ``pending`` text shards (columns ``id``, ``text``, ``shard``,
    ``row``; ``sizes``: every shard's passages), on ``workers`` Ray actors of ``threads`` CPUs (one GPU each when
    ``gpus``): the one Ray pipeline of collection encoding (dense embeddings, SPLADE vectors). A call takes one chunk
    of a shard, ``rows`` passages from the shard's start (the last one shorter): a shard is cut the same way whichever
    shards are pending, and each call's output reaches this process as the call ends (progress within a shard)."""
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    chunks = [{"path": str(texts / f"{n:05d}.parquet"), "start": start, "stop": min(start + rows, sizes[n])}
              for n in pending for start in range(0, sizes[n], rows)]
    # A block per chunk, read by tasks that take no CPU (the encoders hold every CPU: read_parquet's file listing would
    # wait), one at a time: tasks of no CPU are otherwise started a worker process each (47 processes for 40 shards)
    dataset = ray.data.from_items(chunks, override_num_blocks=len(chunks))
    dataset = dataset.map_batches(_read_chunks, batch_size=1, batch_format="numpy", num_cpus=0, concurrency=1)
    dataset = dataset.map_batches(actor, fn_constructor_kwargs=options, batch_size=None,  # a block (chunk) a call
                                  batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=workers),
                                  num_cpus=threads, num_gpus=1 if gpus else 0)
    yield from dataset.iter_batches(batch_size=None, batch_format="numpy")


def pending_shards(folder: Path, count: int, suffix: str) -> list[int]:
    """The shards of ``folder`` (``NNNNN<suffix>``) not yet written, after removing a killed job's unfinished ones."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(".*.tmp"):
        stale.unlink()
    return [n for n in range(count) if not (folder / f"{n:05d}{suffix}").exists()]


def claim_work(out: Path, fingerprint: dict[str, Any], what: str, options: dict[str, str] | None = None) -> None:
    """Record the job's ``fingerprint`` in ``out/work.json``, or refuse a folder whose unfinished job was begun with
    another, naming the settings that differ (``--dtype``, or the option of ``options`` (fingerprint key -> option)
    with the value to resume with, when one of those does)."""
    work = out / "work.json"
    if not work.exists():
        out.mkdir(parents=True, exist_ok=True)
        write_json(work, fingerprint)
        return
    before = json.loads(work.read_text(encoding="utf-8"))
    differ = [key for key in {**before, **fingerprint} if before.get(key) != fingerprint.get(key)]
    if not differ:
        return
    dtype, now = ((found.get("placement") or {}).get("dtype") for found in (before, fingerprint))
    if dtype != now and dtype is not None:  # None: a job begun before its kind recorded a dtype
        raise IkatError(f"an unfinished {what} here was started in dtype {dtype}, not {now}", path=out,
                        fix=f"run it again with --dtype {dtype}, or remove the folder")
    for key, option in (options or {}).items():
        if key in differ and key in before:
            raise IkatError(f"an unfinished {what} here was started with {option} {before[key]}, not "
                            f"{fingerprint.get(key)}", path=out,
                            fix=f"run it again with {option} {before[key]}, or remove the folder")
    raise IkatError(f"an unfinished {what} here was started from other inputs or settings ({', '.join(differ)})",
                    path=out, fix="run it again with the same inputs and options, or remove the folder")


def encode_shards(texts: Path, embeddings: Path, sizes: list[int], dimension: int, encoder: dict[str, Any],
                  ray: Any, workers: int, threads: int, gpus: int,
                  progress: Callable[[int], None] | None = None) -> None:
    """Embed the text shards whose embedding shard is missing, on ``workers`` Ray actors of ``threads`` CPUs
    (one GPU each when ``gpus``); ``progress(passages)`` after each batch the actors return (a shard is renamed
    into place when whole)."""
    pending = pending_shards(embeddings, len(sizes), ".npy")
    if not pending:
        return
    open_shards: dict[int, tuple[np.memmap, Path, int]] = {}
    for batch in encoded_batches(texts, sizes, pending, _EncodeBatches, dict(encoder, threads=threads), ray, workers,
                                 threads, gpus, GPU_ROWS_PER_CALL if gpus else ROWS_PER_CALL):
        for shard in np.unique(batch["shard"]).tolist():
            if shard not in open_shards:
                tmp = embeddings / f".{shard:05d}.npy.tmp"
                memmap = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float16, shape=(sizes[shard], dimension))
                open_shards[shard] = (memmap, tmp, 0)
            memmap, tmp, filled = open_shards[shard]
            mine = batch["shard"] == shard
            memmap[batch["row"][mine]] = batch["vector"][mine]
            filled += int(mine.sum())
            open_shards[shard] = (memmap, tmp, filled)
            if filled == sizes[shard]:
                memmap.flush()
                del open_shards[shard], memmap
                os.replace(tmp, embeddings / f"{shard:05d}.npy")
        if progress:
            progress(len(batch["shard"]))
    if open_shards:
        raise IkatError(f"Ray returned too few embeddings for shards {sorted(open_shards)}", path=embeddings,
                        fix="run the same command again: finished shards are kept")


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
                backend: str = "auto", shard_size: int = SHARD_SIZE, threads: int = 1, workers: int | None = None,
                fmt: str = "auto", splitter: str = "auto", dtype: str = "auto",
                progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Encode the passages of ``inputs`` (a Lucene index or collection files) into ``out`` on ``workers`` Ray
    actors (default: one per GPU, else one per ``threads`` CPUs) in ``dtype`` (``auto``: the placement's, float32
    on CPUs and float16 on GPUs) and index them with faiss; returns the manifest. A finished index with the same
    faiss spec is left as it is; another spec re-indexes the kept embeddings."""
    from ikatkit.index.encode import choose_backend, compile_openvino
    from ikatkit.models import load_sentence_transformer
    from ikatkit.placement import decide, ray_machine
    from ikatkit.raycluster import connect, resources

    out = Path(out)
    started = time.time()
    manifest_path = out / MANIFEST
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("kind") != "dense":
            raise IkatError("this folder holds another kind of index", path=out, fix="choose another --out")
        if faiss_spec in ("auto", manifest["faiss"]):
            return manifest
    work = out / "work.json"
    if not work.exists() and out.exists() and any(out.iterdir()):
        raise IkatError("the output folder exists and is not a dense index", path=out, fix="choose another --out")
    source, passages = read_source(inputs, fmt, splitter)  # inputs checked before the model loads and Ray starts
    loaded = load_sentence_transformer(model, device="cpu")
    ray = connect(ray_address)
    cpus, gpus = resources(ray)
    placement = decide("encoder", ray_machine(gpus), dtype)  # the actors' (float16 on GPUs)
    if placement.dtype != "float32" and backend == "openvino":
        raise IkatError(f"the OpenVINO backend encodes in float32, not in {placement.dtype}",
                        fix="use --backend torch (or auto), or --dtype float32")
    torch_only = gpus or placement.dtype != "float32"
    backend = "torch" if torch_only and backend == "auto" else choose_backend(backend, loaded)
    fingerprint = {"source": source, "model": model, "backend": backend, "shard_size": shard_size,
                   "max_seq_length": loaded.max_seq_length, "normalisation": NORMALISATION,
                   "placement": placement.identity(),
                   "versions": {name: metadata.version(name) for name in ("sentence-transformers", "torch")}}
    claim_work(out, fingerprint, "dense index")
    sizes = write_texts(passages, out / "texts", shard_size)
    dimension = int(loaded.get_embedding_dimension())
    if backend == "openvino":  # converted here once, checked, and found in the cache by the workers of this node
        compile_openvino(loaded)
    encoder = {"model": model, "backend": backend, "batch_size": batch_size, "dtype": placement.dtype}
    workers = workers or max(1, gpus if gpus else cpus // threads)
    encode_shards(out / "texts", out / "embeddings", sizes, dimension, encoder, ray, workers, threads, gpus, progress)
    spec = auto_spec(sum(sizes), dimension) if faiss_spec == "auto" else faiss_spec
    shards = [out / "embeddings" / f"{n:05d}.npy" for n in range(len(sizes))]
    added = build_faiss(shards, dimension, spec, out / "index.faiss")
    manifest = {
        "kind": "dense",
        "model": model,
        "backend": backend,
        "placement": placement.identity(),
        "dimension": dimension,
        "normalisation": NORMALISATION,
        "max_seq_length": loaded.max_seq_length,
        "faiss": spec,
        "metric": "inner_product",
        "counts": {"passages": added, "shards": len(sizes)},
        "shard_size": shard_size,
        "id_map": "texts/NNNNN.parquet column id, shards in order: faiss row i = i-th passage",
        "source": source,
        "parameters": {"batch_size": batch_size, "threads_per_worker": threads, "workers": workers,
                       "ray": ray_address or "local", "cluster": {"cpus": cpus, "gpus": gpus}},
        "versions": {name: metadata.version(name) for name in ("ikatkit", "sentence-transformers", "torch",
                                                               "faiss-cpu", "ray")},
        "seconds": round(time.time() - started, 2),
        "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_json(manifest_path, manifest)
    return manifest
