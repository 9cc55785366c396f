"""``ikatkit index partition``: split a collection (or a built index) into M real Lucene indexes.

Pass 1 streams the passages, embedding them with the bundled MiniLM in batches (cached in
``$IKATKIT_CACHE/partition/`` by the source's fingerprint), so memory holds the embeddings (and a category number
per passage), never the texts. A strategy (``ikatkit.partition.strategies``) assigns each passage a partition;
the assignment is saved in ``DIR/.work/`` so an interrupted job resumes there. Pass 2 stages each partition's
passages as passage JSONL (the lines ``index build`` writes) and ``build_index`` indexes each into
``DIR/part-NNN`` (an index already finished is kept). ``partitions.json`` is written last, atomically.
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import numpy as np
from tqdm import tqdm

from ikatkit.atomic import atomic_open, write_json
from ikatkit.digest import json_digest
from ikatkit.models import DEFAULT_ENCODER, load_sentence_transformer
from ikatkit.errors import IkatError
from ikatkit.index.build import MANIFEST, build_index
from ikatkit.index.segmenters import passage_line
from ikatkit.partition import strategies
from ikatkit.partition.source import Categories, Source
from ikatkit.retrieve.partitioned import PARTITIONS, load_manifest
from ikatkit.paths import cache_root

DEFAULT_MODEL = DEFAULT_ENCODER
BATCH = 256


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
    src = Source(source, fmt, splitter)
    parameters = {"strategy": strategy, "partitions": m, "seed": seed, "model": model,
                  "field": field if strategy == "category" else None,
                  "pattern": pattern if strategy == "category" else None,
                  "graph_neighbours": strategies.GRAPH_NEIGHBOURS if strategy == "graph" else None}
    fingerprint = json_digest([src.fingerprint(), parameters], ascii_only=True)
    if (out / PARTITIONS).exists():
        manifest = load_manifest(out)
        if manifest["fingerprint"] != fingerprint:
            raise IkatError("this folder holds partitions of another source or other parameters", path=out,
                            fix="choose another --out, or remove it to partition again")
        return manifest
    started = time.time()
    work = out / ".work"
    work.mkdir(parents=True, exist_ok=True)
    saved = work / f"assignment-{fingerprint[:16]}.npz"
    if not saved.exists() and (any(work.glob("assignment-*.npz")) or any(out.glob("part-*"))):
        raise IkatError("this folder holds an unfinished partitioning of another source or other parameters",
                        path=out, fix="run that command again to finish it, or remove the folder")
    if saved.exists():
        with np.load(saved) as data:
            labels, centres = data["labels"], (data["centroids"] if "centroids" in data else None)
        category_map = json.loads((work / f"{saved.stem}.json").read_text(encoding="utf-8"))
    else:
        categories = None
        if strategy == "category":
            assert field is not None  # checked above
            categories = Categories(field, pattern)
        embeddings, codes, names = _first_pass(src, model, categories)
        count = len(codes) if embeddings is None else len(embeddings)  # the category strategy embeds nothing
        if m > count:
            raise IkatError(f"--partitions {m} is more than the {count} passages", path=src.path,
                            fix=f"use at most {count} partitions")
        if strategy == "category":
            labels, category_map = strategies.pack_categories(codes, names, m)
        else:
            assert embeddings is not None  # _first_pass embeds for every strategy but category
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
    _stage(src, labels, todo, work)
    for p in tqdm(todo, desc="partitions", unit="index"):
        build_index([work / f"{part_name(p)}.jsonl"], out / part_name(p), fmt="jsonl", threads=threads)
        (work / f"{part_name(p)}.jsonl").unlink()
    parts = []
    for p in range(m):
        built = json.loads((out / part_name(p) / MANIFEST).read_text(encoding="utf-8"))
        if built["counts"]["passages"] != int(sizes[p]):
            raise IkatError(f"{part_name(p)} holds {built['counts']['passages']} passages, {int(sizes[p])} assigned",
                            path=out / part_name(p), fix="remove that folder and run the command again")
        parts.append({"name": part_name(p), "passages": int(sizes[p]), "built": built["built"]})
    manifest = {
        "source": str(src.path), "source_is_index": src.is_index, "fingerprint": fingerprint, **parameters,
        "passages": int(len(labels)), "parts": parts,
        "embedding": None if centres is None else {"model": model, "dimension": int(centres.shape[1]),
                                                    "normalized": True},
        "centroids": None if centres is None else centres.tolist(), "categories": category_map or None,
        "seconds": round(time.time() - started, 2),
        "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_json(out / PARTITIONS, manifest)
    shutil.rmtree(work, ignore_errors=True)
    print(f"partitioned {len(labels)} passages into {m} indexes ({strategy}: {sizes.tolist()}) -> {out}")
    return manifest


def _first_pass(src: Source, model: str, categories: Categories | None
                ) -> tuple[np.ndarray | None, np.ndarray, list[str]]:
    """Embeddings of every passage (cached by the source's fingerprint and model), or category numbers (the
    category strategy embeds nothing)."""
    if categories is not None:
        names: dict[str, int] = {}
        codes = [names.setdefault(categories(record, f"passage {number}"), len(names))
                 for number, record in enumerate(tqdm(src.records(), desc="passages", unit="psg"), start=1)]
        if not codes:
            raise IkatError("no passages read", path=src.path, fix="check the input and --format")
        return None, np.asarray(codes, dtype=np.int64), list(names)
    vectors = embeddings_cache(src, model)
    if vectors.exists():
        return np.load(vectors), np.zeros(0, dtype=np.int64), []
    encoder = load_sentence_transformer(model, device="cpu")
    batches: list[np.ndarray] = []
    batch: list[str] = []
    for record in tqdm(src.records(), desc="passages", unit="psg"):
        batch.append(record["contents"])
        if len(batch) == BATCH:
            batches.append(_embed(encoder, batch))
            batch = []
    if batch:
        batches.append(_embed(encoder, batch))
    if not batches:
        raise IkatError("no passages read", path=src.path, fix="check the input and --format")
    embeddings = np.concatenate(batches)
    with atomic_open(vectors, "wb") as handle:
        np.save(handle, embeddings)
    return embeddings, np.zeros(0, dtype=np.int64), []


def embeddings_cache(src: Source, model: str) -> Path:
    """Where the embeddings of ``src``'s passages (in its order) by ``model`` are kept once computed."""
    key = json_digest([src.fingerprint(), model])[:24]
    return cache_root() / "partition" / f"{key}.npy"


def _embed(encoder: Any, texts: list[str]) -> np.ndarray:
    return encoder.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                          show_progress_bar=False).astype(np.float32)


def _stage(src: Source, labels: np.ndarray, todo: list[int], work: Path) -> None:
    """Write the passages of the partitions in ``todo`` as passage JSONL, in one pass over the source."""
    if not todo or all((work / f"{part_name(p)}.jsonl").exists() for p in todo):
        return
    wanted = set(todo)
    with _staging(work, todo) as handles:
        count = 0
        for record in src.records():
            if count == len(labels):
                raise IkatError(f"the source now has more than the {len(labels)} passages it had when partitioned",
                                path=src.path, fix="remove --out and partition again")
            part = int(labels[count])
            count += 1
            if part in wanted:
                handles[part].write(passage_line(record["id"], record["contents"]))
        if count != len(labels):
            raise IkatError(f"the source now has {count} passages, {len(labels)} when partitioned", path=src.path,
                            fix="remove --out and partition again")


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
