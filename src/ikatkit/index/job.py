"""The one collection-encoding job that every index kind encoding passages shares (``index dense``, ``index sparse``,
``index partition``): the passage source, the text shards, the Ray actors and their chunks, the shards still to
encode, the fingerprint and its refusal, one shard writer, and the placement the actors actually ran with.

A job's folder ``out`` holds ``work.json`` (what changes the outputs: the source, the model, the options; a job
resumed with others is refused, naming the option and the value to resume with), ``texts/NNNNN.parquet`` (the
passages in shards of ``shard_size``: ``id``, ``text``, ``shard``, ``row``; ``texts/_done.json`` marks them
complete) and one folder of output shards a kind names (``embeddings/NNNNN.npy``, ``vectors/NNNNN.jsonl.gz``). Ray
Data reads the pending text shards in chunks of ``rows`` passages (cut from each shard's start, so a resumed job cuts
them as an uninterrupted one), the kind's actors (:class:`EncoderActor`) encode them, and this process assembles each
shard and writes it into place atomically when whole (:class:`Shard`): a killed job resumes with the shards not yet
written.

Each actor decides where it runs itself (:mod:`ikatkit.placement`, on its own machine) and every batch it returns
says so (device, dtype, batch size): that placement, not the driver's guess, is recorded in ``work.json`` and the
manifest; actors that disagree, or a resumed job whose actors run otherwise than the first, are refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ikatkit.atomic import atomic_open, write_json
from ikatkit.errors import IkatError
from ikatkit.progress import units

SHARD_SIZE = 100_000
WORK = "work.json"
PLACEMENT_COLUMN = "placement"  # each actor's output batch: the JSON of the placement it ran with


class Steps(Protocol):
    """What the job tells the one watching it (:class:`ikatkit.progress.Progress` is one): the step at work, the
    passages it will encode once counted, and each batch's passages as the actors return it."""

    def now(self, doing: str | None) -> None: ...

    def expect(self, total: int) -> None: ...

    def update(self, count: int) -> None: ...


class Unwatched:
    """Steps nobody watches."""

    def now(self, doing: str | None) -> None:
        return None

    def expect(self, total: int) -> None:
        return None

    def update(self, count: int) -> None:
        return None


def read_source(inputs: Sequence[str | Path], fmt: str = "auto",
                splitter: str = "auto") -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """A fingerprint of the source and its passages as records (``id``, ``contents`` and any other fields: a
    collection's ``url``, a stored raw JSON's keys): a Lucene index's stored passages in index order, or the
    passages ``index build`` would index from collection files (inputs are checked now, before a model loads or Ray
    starts). The one passage-source reader of every index kind that encodes passages."""
    from ikatkit.index.lucene import is_lucene_folder, lucene_info
    from ikatkit.index.texts import index_records

    paths = [Path(p) for p in inputs]
    if len(paths) == 1 and is_lucene_folder(paths[0]):
        info = lucene_info(paths[0])
        info.require_texts("encoding its passages")
        manifest = info.manifest or {}
        return ({"lucene": str(info.path), "built": manifest.get("built"), "counts": manifest.get("counts"),
                 **({} if info.own else {"commit": info.fingerprint})},
                index_records(info.path, "encoding its passages"))
    from ikatkit.collection.readers import ReadStats, input_files, read_passages
    from ikatkit.collection.segment import splitter as splitter_function

    files = input_files(paths)
    split = splitter_function(splitter)

    def passages() -> Iterator[dict[str, Any]]:
        stats = ReadStats()
        for path in files:
            for passage in read_passages(path, fmt, stats, split):
                yield {"id": passage.id, "contents": passage.contents, "url": passage.url}

    sources = [{"path": str(f.resolve()), "bytes": f.stat().st_size, "mtime_ns": f.stat().st_mtime_ns} for f in files]
    return {"files": sources, "format": fmt, "splitter": splitter}, passages()


def write_texts(records: Iterator[dict[str, Any]], folder: Path, shard_size: int,
                fields: Sequence[str] = ()) -> list[int]:
    """The passages as parquet shards of ``shard_size`` in ``folder`` (``id``, ``text``, ``shard``, ``row``, and a
    string column for each of ``fields``, None where a record lacks it; shards already written are kept); the number
    of passages in each shard."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = folder / "_done.json"
    if done.exists():
        return json.loads(done.read_text(encoding="utf-8"))["sizes"]
    folder.mkdir(parents=True, exist_ok=True)
    sizes: list[int] = []
    ids: list[str] = []
    texts: list[str] = []
    extra: dict[str, list[str | None]] = {name: [] for name in fields if name not in ("id", "text")}

    def flush() -> None:
        path = folder / f"{len(sizes):05d}.parquet"
        if not path.exists():
            table = pa.table({"id": ids, "text": texts, "shard": pa.array([len(sizes)] * len(ids), pa.int32()),
                              "row": pa.array(range(len(ids)), pa.int32()),
                              **{name: pa.array(values, pa.string()) for name, values in extra.items()}})
            with atomic_open(path, "wb") as handle:
                pq.write_table(table, handle, compression="zstd")
        sizes.append(len(ids))
        ids.clear()
        texts.clear()
        for values in extra.values():
            values.clear()

    for record in records:
        ids.append(record["id"])
        texts.append(record["contents"])
        for name, values in extra.items():
            value = record.get(name)
            values.append(None if value is None else str(value))
        if len(ids) == shard_size:
            flush()
    if ids:
        flush()
    if not sizes:
        raise IkatError("no passages read",
                        fix="check the input (a Lucene index storing its texts, or collection files)")
    write_json(done, {"passages": sum(sizes), "sizes": sizes})
    return sizes


def text_shards(folder: Path) -> list[Path]:
    """The text shards of a job's ``texts`` folder, in order."""
    return sorted(folder.glob("*.parquet"))


def start(out: Path, kind: str) -> None:
    """Refuse an ``--out`` that holds something other than an unfinished job (of this kind: its fingerprint says)."""
    if (out / WORK).exists() or not out.exists() or not any(out.iterdir()):
        return
    raise IkatError(f"the output folder exists and is not a {kind} index", path=out, fix="choose another --out")


def claim_work(out: Path, fingerprint: dict[str, Any], what: str, options: dict[str, str] | None = None) -> None:
    """Record the job's ``fingerprint`` in ``out/work.json``, or refuse a folder whose unfinished job was begun with
    another, naming the settings that differ (the option of ``options`` (fingerprint key -> option) with the value to
    resume with, when one of those does). The placement the actors ran with (:func:`record_placement`) is not part of
    the comparison: it is checked when they report it."""
    work = out / WORK
    if not work.exists():
        out.mkdir(parents=True, exist_ok=True)
        write_json(work, fingerprint)
        return
    before = {k: v for k, v in json.loads(work.read_text(encoding="utf-8")).items() if k != "placement"}
    differ = [key for key in {**before, **fingerprint} if before.get(key) != fingerprint.get(key)]
    if not differ:
        return
    for key, option in (options or {}).items():
        if key in differ and key in before:
            raise IkatError(f"an unfinished {what} here was started with {option} {before[key]}, not "
                            f"{fingerprint.get(key)}", path=out,
                            fix=f"run it again with {option} {before[key]}, or remove the folder")
    raise IkatError(f"an unfinished {what} here was started from other inputs or settings ({', '.join(differ)})",
                    path=out, fix="run it again with the same inputs and options, or remove the folder")


def recorded_placement(out: Path) -> dict[str, Any] | None:
    """The placement the job's actors reported so far (None before the first batch)."""
    work = out / WORK
    return json.loads(work.read_text(encoding="utf-8")).get("placement") if work.exists() else None


def record_placement(out: Path, ran: dict[str, Any], what: str) -> None:
    """Record in ``work.json`` the placement the actors ran with, or refuse one other than an earlier run's (its
    vectors would be mixed with theirs)."""
    before = recorded_placement(out)
    if before is None:
        work = out / WORK
        write_json(work, {**json.loads(work.read_text(encoding="utf-8")), "placement": ran})
    elif before != ran:
        raise IkatError(f"this unfinished {what} was encoded with {_said(before)}, but its actors now run with "
                        f"{_said(ran)}", path=out,
                        fix="resume it on machines like the first run's (or with its --dtype/--batch-size), or "
                            "remove the folder")


def _said(placement: dict[str, Any]) -> str:
    return f"{placement.get('dtype')} on {placement.get('device')} (batch {placement.get('batch_size')})"


def pending_shards(folder: Path, count: int, suffix: str) -> list[int]:
    """The shards of ``folder`` (``NNNNN<suffix>``) not yet written, after removing a killed job's unfinished ones."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(".*.tmp"):
        stale.unlink()
    return [n for n in range(count) if not (folder / f"{n:05d}{suffix}").exists()]


def check_dtype(kind: str, dtype: str, gpus: int) -> None:
    """Refuse, before any actor starts, an unknown ``--dtype``, or one the actors cannot compute where they are known
    to be CPUs (no GPU in the cluster: float16); on GPUs each actor decides on its own machine."""
    from ikatkit.placement import Machine, decide

    decide(kind, Machine("cuda", "a GPU of the cluster") if gpus else Machine("cpu"), dtype)


def workers_for(workers: int | None, cpus: int, gpus: int, threads: int) -> int:
    """The encoder actors of a job: ``workers`` as asked, else one per GPU, else one per ``threads`` CPUs."""
    return workers or max(1, gpus if gpus else cpus // threads)


class EncoderActor:
    """A Ray Data actor of collection encoding: a kind's subclass builds its ``encoder`` (a
    :class:`ikatkit.placement.PlacedModel`, which decides its placement on this actor's own machine) and the
    ``batch_size`` it encodes in, and turns a batch (``id``, ``text``, ``shard``, ``row``) into its output columns
    (:meth:`encode`); every output batch carries ``shard``, ``row`` and the placement it ran with."""

    encoder: Any
    batch_size: int

    def encode(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        found = self.encode(batch)
        ran = json.dumps(self.encoder.ran(self.batch_size), sort_keys=True)
        return {"shard": batch["shard"], "row": batch["row"], **found,
                PLACEMENT_COLUMN: np.array([ran] * len(batch["shard"]), dtype=object)}


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


def encoded_batches(texts: Path, sizes: list[int], pending: list[int], actor: type, options: dict[str, Any], ray: Any,
                    workers: int, threads: int, gpus: int, rows: int) -> Iterator[dict[str, np.ndarray]]:
    """The batches ``actor(**options)`` makes of the ``pending`` text shards (``sizes``: every shard's passages), on
    ``workers`` Ray actors of ``threads`` CPUs (one GPU each when ``gpus``). A call takes one chunk of a shard,
    ``rows`` passages from the shard's start (the last one shorter): a shard is cut the same way whichever shards are
    pending, and each call's output reaches this process as the call ends (progress within a shard)."""
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    chunks = [{"path": str(texts / f"{n:05d}.parquet"), "start": start, "stop": min(start + rows, sizes[n])}
              for n in pending for start in range(0, sizes[n], rows)]
    # A block per chunk, read by tasks that take no CPU (the encoders hold every CPU: read_parquet's file listing would
    # wait), one at a time: tasks of no CPU are otherwise started a worker process each (47 processes for 40 shards)
    dataset = ray.data.from_items(chunks, override_num_blocks=len(chunks))
    dataset = dataset.map_batches(_read_chunks, batch_size=1, batch_format="numpy", num_cpus=0,
                                  compute=ray.data.TaskPoolStrategy(size=1))
    dataset = dataset.map_batches(actor, fn_constructor_kwargs=options, batch_size=None,  # a block (chunk) a call
                                  batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=workers),
                                  num_cpus=threads, num_gpus=1 if gpus else 0)
    yield from dataset.iter_batches(batch_size=None, batch_format="numpy")


class Shard(Protocol):
    """One output shard being assembled in its temporary file: rows put as the actors return them, the file complete
    once committed (the job then renames it into place)."""

    def put(self, rows: np.ndarray, batch: dict[str, np.ndarray], mine: np.ndarray) -> None: ...

    def commit(self) -> None: ...


def encode_pending(out: Path, folder: str, suffix: str, sizes: list[int], open_shard: Callable[[int, int, Path], Shard],
                   actor: type, options: dict[str, Any], ray: Any, workers: int, threads: int, gpus: int, rows: int,
                   what: str, progress: Steps | None = None) -> dict[str, Any] | None:
    """Encode the text shards of ``out/texts`` whose output shard (``out/folder/NNNNN<suffix>``) is missing; each
    shard is opened by ``open_shard(number, size, temporary file)``, filled, committed and renamed into place when
    whole; ``progress`` is told the passages pending, the actors starting, then each batch's passages. Returns the
    placement the actors ran with (recorded in ``work.json``; that of an earlier run when nothing was left to
    encode)."""
    target = out / folder
    pending = pending_shards(target, len(sizes), suffix)
    open_shards: dict[int, tuple[Shard, int]] = {}
    seen: str | None = None
    steps = progress or Unwatched()
    steps.expect(sum(sizes[n] for n in pending))
    if pending:
        steps.now(f"starting {workers} encoder {units(workers, 'actors')} on Ray (each loads the model)")
    for batch in encoded_batches(out / "texts", sizes, pending, actor, options, ray, workers, threads, gpus, rows)\
            if pending else ():
        if (now := str(batch[PLACEMENT_COLUMN][0])) != seen:  # a batch is one actor's call: one placement
            record_placement(out, json.loads(now), what)  # actors that disagree are refused here
            if seen is None:
                steps.now(f"encoding on {workers} {units(workers, 'actors')}")
            seen = now
        for shard in np.unique(batch["shard"]).tolist():
            tmp = target / f".{shard:05d}{suffix}.tmp"
            if shard not in open_shards:
                open_shards[shard] = (open_shard(shard, sizes[shard], tmp), 0)
            found, filled = open_shards[shard]
            mine = batch["shard"] == shard
            found.put(batch["row"][mine], batch, mine)
            filled += int(mine.sum())
            open_shards[shard] = (found, filled)
            if filled == sizes[shard]:
                found.commit()
                del open_shards[shard]
                os.replace(tmp, target / f"{shard:05d}{suffix}")
        steps.update(len(batch["shard"]))
    if open_shards:
        raise IkatError(f"Ray returned too few results for shards {sorted(open_shards)}", path=target,
                        fix="run the same command again: finished shards are kept")
    return recorded_placement(out)
