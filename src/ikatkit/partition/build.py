"""``ikatkit index partition``: split a collection (or a built index) into M real Lucene indexes.

Pass 1 is the collection-encoding job of every index kind (:mod:`ikatkit.index.job`, in ``DIR/.work/``): the
passages read once into text shards (with the ``--field`` of the category strategy), embedded by MiniLM on Ray actors
(float32, unit length; kept in ``$IKATKIT_CACHE/partition/`` by the source's fingerprint and model, so a second
partitioning of the same source embeds nothing). A strategy (``ikatkit.partition.strategies``) assigns each passage a
partition; the assignment is saved in ``DIR/.work/`` so an interrupted job resumes there. Pass 2 stages each
partition's passages from the text shards as passage JSONL (the lines ``index build`` writes) and ``build_index``
indexes each into ``DIR/part-NNN`` (an index already finished is kept). ``partitions.json`` is written last,
atomically (:mod:`ikatkit.index.manifest`, kind ``partitions``).
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import numpy as np

from ikatkit.atomic import atomic_open
from ikatkit.digest import json_digest
from ikatkit.errors import IkatError
from ikatkit.index import job
from ikatkit.index.build import build_index
from ikatkit.index.lucene import is_lucene_folder
from ikatkit.index.manifest import MANIFEST, PARTITIONS, finished, write_manifest
from ikatkit.index.segmenters import passage_line
from ikatkit.models import DEFAULT_ENCODER
from ikatkit.partition import strategies
from ikatkit.paths import cache_root

DEFAULT_MODEL = DEFAULT_ENCODER
BATCH = 64  # texts a forward pass
ROWS_PER_CALL = 256  # passages an embedding actor takes a call


class Categories:
    """A passage's category: the value of ``field``, a URL's host, or the first group of ``pattern`` in it."""

    def __init__(self, field: str, pattern: str | None = None) -> None:
        self.field = field
        try:
            self.pattern = re.compile(pattern) if pattern else None
        except re.error as err:
            raise IkatError(f"invalid --pattern {pattern!r}: {err}", fix="give a Python regular expression") from None
        if self.pattern is not None and self.pattern.groups < 1:
            raise IkatError(f"--pattern {pattern!r} has no group", fix="mark the category with (...), e.g. '^([^-]+)'")

    def __call__(self, record: dict[str, str], where: str) -> str:
        value = record.get(self.field)
        if not isinstance(value, str) or not value:
            raise IkatError(f"passage {record.get('id')!r} has no field {self.field!r}", where=where,
                            fix=f"choose a --field the records have (this one has {sorted(record)})")
        if self.pattern is not None:
            found = self.pattern.search(value)
            if not found or found.group(1) is None:
                raise IkatError(f"--pattern does not match {self.field} {value!r} of passage {record.get('id')!r}",
                                where=where, fix="use a pattern that matches every passage")
            return found.group(1)
        host = urlsplit(value).hostname if value.startswith(("http://", "https://")) else None
        return host or value


class _Embed(job.EncoderActor):
    """Each passage of a batch as its float32 unit-length MiniLM embedding (``vector``)."""

    def __init__(self, model: str, threads: int) -> None:
        from ikatkit.index.encode import DenseEncoder

        self.encoder = DenseEncoder(model, "torch", threads, device="cpu", dtype="float32")
        self.batch_size = BATCH

    def encode(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"vector": self.encoder.encode([str(t) for t in batch["text"]], self.batch_size)}


class _Rows:
    """A shard's embeddings, kept in memory and saved as ``.npy`` when whole."""

    def __init__(self, number: int, size: int, path: Path) -> None:
        self.rows: np.ndarray | None = None
        self.size, self.path = size, path

    def put(self, rows: np.ndarray, batch: dict[str, np.ndarray], mine: np.ndarray) -> None:
        vectors = np.stack(batch["vector"][mine]) if batch["vector"].dtype == object else batch["vector"][mine]
        if self.rows is None:
            self.rows = np.zeros((self.size, vectors.shape[1]), dtype=np.float32)
        self.rows[rows] = vectors

    def commit(self) -> None:
        assert self.rows is not None  # committed when whole
        with open(self.path, "wb") as handle:
            np.save(handle, self.rows)


def part_name(number: int) -> str:
    return f"part-{number:03d}"


def partition_index(source: str | Path, out: str | Path, strategy: str, m: int, *, seed: int = 0,
                    field: str | None = None, pattern: str | None = None, fmt: str = "auto", splitter: str = "auto",
                    model: str = DEFAULT_MODEL, threads: int | None = None) -> dict[str, Any]:
    """Partition ``source`` into ``m`` indexes under ``out``; the partition manifest (the existing one if done)."""
    if strategy not in strategies.STRATEGIES:
        raise IkatError(f"unknown strategy {strategy!r}", fix=f"use one of {strategies.STRATEGIES}")
    if m < 1:
        raise IkatError(f"--partitions {m} is less than 1", fix="partition into 1 or more partitions")
    if strategy == "category" and not field:
        raise IkatError("the category strategy needs --field", fix="e.g. --field url (the URL's host)")
    out = Path(out)
    categories = Categories(field, pattern) if strategy == "category" and field else None
    source_fingerprint, records = job.read_source([source], fmt, splitter)
    parameters: dict[str, Any] = {"strategy": strategy, "partitions": m, "seed": seed, "model": model,
                  "field": field if strategy == "category" else None,
                  "pattern": pattern if strategy == "category" else None,
                  "graph_neighbours": strategies.GRAPH_NEIGHBOURS if strategy == "graph" else None}
    fingerprint = json_digest([source_fingerprint, parameters], ascii_only=True)
    done = finished(out, PARTITIONS)
    if done is not None:
        if done["fingerprint"] != fingerprint:
            raise IkatError("this folder holds partitions of another source or other parameters", path=out,
                            fix="choose another --out, or remove it to partition again")
        from ikatkit.retrieve.partitioned import load_manifest

        return load_manifest(out)
    started = time.time()
    work = out / ".work"
    saved = work / f"assignment-{fingerprint[:16]}.npz"
    if not saved.exists() and (any(work.glob("assignment-*.npz")) or any(out.glob("part-*"))):
        raise IkatError("this folder holds an unfinished partitioning of another source or other parameters",
                        path=out, fix="run that command again to finish it, or remove the folder")
    job.claim_work(work, {"source": source_fingerprint, **parameters}, "partitioning")
    sizes_of_shards = job.write_texts(records, work / "texts", job.SHARD_SIZE,
                                      [categories.field] if categories else ())
    count = sum(sizes_of_shards)
    if saved.exists():
        with np.load(saved) as data:
            labels, centres = data["labels"], (data["centroids"] if "centroids" in data else None)
        category_map = json.loads((work / f"{saved.stem}.json").read_text(encoding="utf-8"))
    else:
        if m > count:
            raise IkatError(f"--partitions {m} is more than the {count} passages", path=Path(source),
                            fix=f"use at most {count} partitions")
        if categories is not None:
            codes, names = _categories(work, categories)
            labels, category_map = strategies.pack_categories(codes, names, m)
            embeddings = None
        else:
            embeddings = _embeddings(work, source_fingerprint, model, sizes_of_shards, threads)
            labels, category_map = strategies.assign(strategy, m, seed, embeddings), {}
        sizes = np.bincount(labels, minlength=m)
        if (sizes == 0).any():
            raise IkatError(f"the {strategy} strategy left partition(s) {np.flatnonzero(sizes == 0).tolist()} empty",
                            fix="use fewer --partitions or another --seed")
        centres = None if embeddings is None else strategies.centroids(embeddings, labels, m)
        del embeddings
        with atomic_open(work / f"{saved.stem}.json") as handle:
            json.dump(category_map, handle)
        with atomic_open(saved, "wb") as handle:
            if centres is None:
                np.savez(handle, labels=labels)
            else:
                np.savez(handle, labels=labels, centroids=centres)
    sizes = np.bincount(labels, minlength=m)
    todo = [p for p in range(m) if not (out / part_name(p) / MANIFEST).exists()]
    _stage(work / "texts", labels, todo, work)
    for p in todo:
        build_index([work / f"{part_name(p)}.jsonl"], out / part_name(p), fmt="jsonl", threads=threads)
        (work / f"{part_name(p)}.jsonl").unlink()
    parts = []
    for p in range(m):
        built = json.loads((out / part_name(p) / MANIFEST).read_text(encoding="utf-8"))
        if built["counts"]["passages"] != int(sizes[p]):
            raise IkatError(f"{part_name(p)} holds {built['counts']['passages']} passages, {int(sizes[p])} assigned",
                            path=out / part_name(p), fix="remove that folder and run the command again")
        parts.append({"name": part_name(p), "passages": int(sizes[p]), "built": built["built"]})
    manifest = write_manifest(
        out, PARTITIONS, started, source=str(source), source_is_index=is_lucene_folder(source),
        fingerprint=fingerprint, **parameters, passages=int(len(labels)), parts=parts,
        counts={"passages": int(len(labels)), "partitions": m},
        embedding=None if centres is None else {"model": model, "dimension": int(centres.shape[1]),
                                                "normalized": True},
        centroids=None if centres is None else centres.tolist(), categories=category_map or None,
        parameters={"threads": threads})
    shutil.rmtree(work, ignore_errors=True)
    print(f"partitioned {len(labels)} passages into {m} indexes ({strategy}: {sizes.tolist()}) -> {out}")
    return manifest


def _categories(work: Path, categories: Categories) -> tuple[np.ndarray, list[str]]:
    """Each passage's category number (in text-shard order) and the categories' names."""
    import pyarrow.parquet as pq

    names: dict[str, int] = {}
    codes: list[int] = []
    for shard in job.text_shards(work / "texts"):
        table = pq.read_table(shard, columns=["id", categories.field] if categories.field != "id" else ["id"])
        values = table.column(categories.field).to_pylist()
        for pid, value in zip(table.column("id").to_pylist(), values):
            record = {"id": pid} if value is None else {"id": pid, categories.field: value}
            codes.append(names.setdefault(categories(record, f"passage {len(codes) + 1}"), len(names)))
    return np.asarray(codes, dtype=np.int64), list(names)


def _embeddings(work: Path, source: dict[str, Any], model: str, sizes: list[int], threads: int | None) -> np.ndarray:
    """Every passage's embedding in text-shard order: from the cache, else encoded on Ray actors (one a CPU) and
    cached."""
    cached = embeddings_cache(source, model)
    if cached.exists():
        return np.load(cached)
    from ikatkit.raycluster import connect, resources

    ray = connect()
    cpus, _ = resources(ray)
    job.encode_pending(work, "embeddings", ".npy", sizes, _Rows, _Embed, {"model": model, "threads": 1}, ray,
                       job.workers_for(None, cpus, 0, 1), 1, 0, ROWS_PER_CALL, "partitioning")
    embeddings = np.concatenate([np.load(work / "embeddings" / f"{n:05d}.npy") for n in range(len(sizes))])
    cached.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(cached, "wb") as handle:
        np.save(handle, embeddings)
    return embeddings


def embeddings_cache(source: dict[str, Any], model: str) -> Path:
    """Where the embeddings of a source's passages (``job.read_source``'s fingerprint, in its order) by ``model`` are
    kept once computed."""
    key = json_digest([source, model])[:24]
    return cache_root() / "partition" / f"{key}.npy"


def _stage(texts: Path, labels: np.ndarray, todo: list[int], work: Path) -> None:
    """Write the passages of the partitions in ``todo`` as passage JSONL, in one pass over the text shards."""
    import pyarrow.parquet as pq

    if not todo or all((work / f"{part_name(p)}.jsonl").exists() for p in todo):
        return
    wanted = set(todo)
    with _staging(work, todo) as handles:
        count = 0
        for shard in job.text_shards(texts):
            table = pq.read_table(shard, columns=["id", "text"])
            for pid, text in zip(table.column("id").to_pylist(), table.column("text").to_pylist()):
                part = int(labels[count])
                count += 1
                if part in wanted:
                    handles[part].write(passage_line(pid, text))


class _staging:
    """Atomic staging files, one per partition (a file exists under its name only once complete)."""

    def __init__(self, work: Path, parts: list[int]) -> None:
        self.opened = {p: atomic_open(work / f"{part_name(p)}.jsonl", "wb") for p in parts}

    def __enter__(self) -> dict[int, IO[bytes]]:
        self.handles = {p: opener.__enter__() for p, opener in self.opened.items()}
        return self.handles

    def __exit__(self, *exc: Any) -> None:
        for opener in self.opened.values():
            opener.__exit__(*exc)
