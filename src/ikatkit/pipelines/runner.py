"""Run a configured pipeline over topics: batched, checkpointed per batch of turns, resumable.

Batches are fixed chunks of the topics' turns in order, and a batch's records are written as one
atomic checkpoint file, so a run killed at any point and restarted redoes only unfinished batches,
with the same batch composition, and writes byte-identical run files.

One process writes an output folder at a time (``run.lock``, held with ``flock``: a killed holder's lock is
free again). The checkpoints' fingerprint (``checkpoints/fingerprint.json``, see
:mod:`ikatkit.pipelines.fingerprint`) is written once the config has been checked and the models loaded,
just before the first batch; checkpoints of another fingerprint, or with none, are never reused.
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ikatkit.atomic import write_json, write_text
from ikatkit.errors import IkatError
from ikatkit.lock import run_lock
from ikatkit.paths import cache_at, cache_root
from ikatkit.pipelines.config import RunConfig, load_config
from ikatkit.pipelines.fingerprint import fingerprint, fingerprint_parts
from ikatkit.pipelines.pipeline import Pipeline, tally
from ikatkit.pipelines.queries import pin_query_files
from ikatkit.pipelines.record import TurnRecord, records_for
from ikatkit.pipelines.registry import stages as registered_stages
from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult, strictly_decreasing
from ikatkit.runs.templates import SUFFIX as RUN_SUFFIX
from ikatkit.topics import Topics, load_topics

VERSIONED = ("ikatkit", "pyserini", "torch", "transformers", "sentence-transformers", "ir-measures", "openai")


@dataclass
class RunOutcome:
    """Where a run's files are and what was done."""

    run: Run
    records: list[TurnRecord]
    run_file: Path
    trec_file: Path
    manifest_file: Path
    batches_done_now: int
    valid: bool | None

    def summary(self) -> str:
        """A few lines for the terminal: turns, time per turn, files, notes, validity."""
        manifest = json.loads(self.manifest_file.read_text(encoding="utf-8"))
        lines = [f"run {manifest['run_name']}: {manifest['turns']} turns; {self.work_now(manifest)}",
                 f"  official run: {self.run_file}", f"  TREC run:     {self.trec_file}",
                 f"  manifest:     {self.manifest_file}"]
        if manifest["turns_without_passages"]:
            lines.append(f"  WARNING: {manifest['turns_without_passages']} of {manifest['turns']} turns "
                         "have no passages")
        if manifest["notes"]:
            lines.append("  notes: " + "; ".join(f"{n} x{c}" for n, c in manifest["notes"].items()))
        if self.valid is not None:
            lines.append(f"  validation:   {'valid' if self.valid else 'INVALID'} "
                         f"(see {self.run_file.parent / 'validation.txt'})")
        return "\n".join(lines)

    def work_now(self, manifest: dict[str, Any]) -> str:
        """What this call did: the turns it ran and their time, and the turns earlier calls' checkpoints gave."""
        now, turns = manifest["turns_run_now"], manifest["turns"]
        done = (f"{now} turns run now in {self.batches_done_now} batches, "
                f"{manifest['seconds_run_now'] / now:.2f} s/turn" if now else "nothing run now")
        return done + (f"; {turns - now} turns from the checkpoints of an earlier run" if now < turns else "")


def to_run(records: list[TurnRecord], config: RunConfig, year: int,
           ptkb_keys: Mapping[str, Collection[str]] | None = None) -> Run:
    """The run model of finished records: one response per turn, passages in rank order. With ``ptkb_keys``
    (turn id -> the keys of its topic's PTKB), only those keys are cited as PTKB provenance: statements
    ``track_persona`` added (``u1`` ...) come from the user's words, not from the PTKB the format cites."""
    turns = []
    for record in records:
        used = set(record.used)
        passages = [PassageRef(pid, score, record.passage_texts.get(pid, ""), pid in used)
                    for pid, score in strictly_decreasing(record.ranking[:1000])]
        citable = ptkb_keys[record.qid] if ptkb_keys is not None else record.ptkb_all
        ptkb = [PtkbRef(key, score, record.ptkb_all.get(key, "")) for key, score in record.ptkb if key in citable]
        turns.append(TurnResult(record.qid, [Response(1, record.response, passages, ptkb)]))
    return Run(config.name, config.run_type, turns, year, config.team_id)


def package_versions() -> dict[str, str]:
    """The installed versions of the packages that change outputs (for manifests)."""
    found = {}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


class Checkpoints:
    """One JSON file per finished batch under ``out/checkpoints``, tied to the run's fingerprint."""

    def __init__(self, out: Path) -> None:
        self.dir = out / "checkpoints"  # made with the fingerprint, once the inputs are checked
        self.stamp = self.dir / "fingerprint.json"

    def check(self, parts: dict[str, str]) -> None:
        """Refuse checkpoints of other inputs (naming what changed) and checkpoints without a fingerprint."""
        if self.stamp.exists():
            kept = json.loads(self.stamp.read_text(encoding="utf-8"))["parts"]
            changed = [key for key, value in parts.items() if kept.get(key) != value]
            if changed:
                raise IkatError(f"the output folder holds checkpoints of another {', '.join(changed)}",
                                path=self.dir, fix="use a new --out, or pass --restart to discard them")
        elif any(self.dir.glob("batch-*.json")):
            raise IkatError("the output folder holds checkpoints without a fingerprint (an older ikatkit, or "
                            "files copied in): they cannot be checked, so they are not reused",
                            path=self.dir, fix="pass --restart to discard them, or use a new --out")

    def write_stamp(self, parts: dict[str, str]) -> None:
        """Record the fingerprint (once, atomically) before the first batch is saved."""
        if not self.stamp.exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            write_json(self.stamp, {"fingerprint": fingerprint(parts), "parts": parts})

    def path(self, batch: int) -> Path:
        return self.dir / f"batch-{batch:05d}.json"

    def done(self, batch: int) -> bool:
        return self.path(batch).exists()

    def save(self, batch: int, records: list[TurnRecord], seconds: dict[str, float]) -> None:
        write_json(self.path(batch), {"batch": batch, "qids": [r.qid for r in records], "seconds": seconds,
                                      "records": [r.to_json() for r in records]}, indent=None)

    def load(self, batch: int) -> tuple[list[TurnRecord], dict[str, float]]:
        data = json.loads(self.path(batch).read_text(encoding="utf-8"))
        return [TurnRecord.from_json(r) for r in data["records"]], data["seconds"]


def run_pipeline(config: RunConfig | str | Path, topics: Topics | str | Path, out: str | Path, *,
                 index: str | Path | None = None, cache_dir: str | Path | None = None, validate: bool = True,
                 restart: bool = False, max_batches: int | None = None) -> RunOutcome:
    """Run ``config`` over ``topics`` into ``out``; resume from its checkpoints unless ``restart``.

    ``cache_dir`` is the cache root for everything the run caches (:func:`ikatkit.paths.cache_at`; default
    :func:`ikatkit.paths.cache_root`). ``max_batches`` stops after that many new batches (used to test
    kill-and-resume).
    """
    config = config if isinstance(config, RunConfig) else load_config(config)
    topics = topics if isinstance(topics, Topics) else load_topics(topics)
    config = pin_query_files(config, topics.qids)
    out = Path(out)
    with cache_at(cache_dir), run_lock(out):
        return _run_locked(config, topics, out, index, validate, restart, max_batches)


def _run_locked(config: RunConfig, topics: Topics, out: Path, index: str | Path | None, validate: bool,
                restart: bool, max_batches: int | None) -> RunOutcome:
    if restart and (out / "checkpoints").exists():
        for stale in (out / "checkpoints").iterdir():
            stale.unlink()
    records = records_for(topics)
    checkpoints = Checkpoints(out)
    raw_records = [r.to_json() for r in records]
    checkpoints.check(fingerprint_parts(config.raw, raw_records, topics.year, index, models=False))  # before loading
    size = config.batch_size
    batches = [records[i: i + size] for i in range(0, len(records), size)]
    pending = [i for i in range(len(batches)) if not checkpoints.done(i)]
    pipeline = Pipeline.from_config(config, index, out) if pending else Pipeline([], config)
    pipeline.check(records)
    parts = fingerprint_parts(config.raw, raw_records, topics.year, index, cache_root() / "digests")
    checkpoints.check(parts)
    if pending:
        checkpoints.write_stamp(parts)
    done_turns = len(records) - sum(len(batches[i]) for i in pending)
    per_stage = sys.stderr.isatty()  # a bar per stage on a terminal; one bar, printed every 30 s, in logs
    bars = ([tqdm(total=len(records), initial=done_turns, desc=f"{s.name:>16}", position=p, leave=True, unit="turn")
             for p, s in enumerate(pipeline.stages)] if per_stage else
            [tqdm(total=len(records), initial=done_turns, desc="turns", unit="turn", mininterval=30)])
    done_now, turns_now, seconds_now = 0, 0, 0.0
    for i in pending:
        if max_batches is not None and done_now >= max_batches:
            break
        batch = pipeline(batches[i], (lambda p, done: bars[p].update(len(done))) if per_stage else None)
        if not per_stage:
            bars[0].update(len(batch))
        checkpoints.save(i, batch, pipeline.seconds)
        done_now, turns_now = done_now + 1, turns_now + len(batch)
        seconds_now += sum(pipeline.seconds.values())
    for bar in bars:
        bar.close()
    if not all(checkpoints.done(i) for i in range(len(batches))):
        raise IkatError(f"run stopped after {done_now} new batches; rerun to resume", path=out)
    return _finish(config, topics, out, index, checkpoints, len(batches), pipeline, (done_now, turns_now, seconds_now),
                   validate)


def _finish(config: RunConfig, topics: Topics, out: Path, index: str | Path | None, checkpoints: Checkpoints,
            n_batches: int, pipeline: Pipeline, now: tuple[int, int, float], validate: bool) -> RunOutcome:
    """Write the run files and the manifest from all checkpoints; ``now``: the batches, turns and stage seconds
    of this call (the manifest's ``seconds_per_turn`` covers every turn, whichever call ran it)."""
    from ikatkit.runs.io import write_run

    records: list[TurnRecord] = []
    seconds: dict[str, float] = {}
    for i in range(n_batches):
        batch, batch_seconds = checkpoints.load(i)
        records.extend(batch)
        for name, value in batch_seconds.items():
            seconds[name] = seconds.get(name, 0.0) + value
    own = {record.qid: set(topics.conversation_of(record.qid).ptkb) for record in records}
    run = to_run(records, config, topics.year, own)
    run_file = out / f"{config.name}{RUN_SUFFIX[topics.year]}"
    trec_file = out / f"{config.name}.trec"
    write_run(run, run_file, str(topics.year))
    write_run(run, trec_file, "trec")
    valid = None
    if validate:
        from ikatkit.runs.validate import validate_run

        report = validate_run(run, topics)
        write_text(out / "validation.txt", str(report) + "\n")
        valid = report.ok
    notes, guarded = tally(records)
    manifest: dict[str, Any] = {
        "run_name": config.name, "run_type": config.run_type, "year": topics.year, "turns": len(records),
        "turns_without_passages": sum(not record.ranking for record in records),
        "config": config.raw, "config_file": str(config.path) if config.path else None,
        "topics": str(topics.path) if topics.path else None, "index": str(index) if index else None,
        "index_manifest": _index_manifest(index),
        "files": {"run": run_file.name, "trec": trec_file.name},
        "seconds_per_stage": {k: round(v, 3) for k, v in seconds.items()},
        "seconds_per_turn": round(sum(seconds.values()) / max(len(records), 1), 4),
        "batches_run_now": now[0], "turns_run_now": now[1], "seconds_run_now": round(now[2], 3),
        "resource_stats": pipeline.stats, "notes": notes,
        "ptkb_not_cited": sum(key not in own[r.qid] for r in records for key, _ in r.ptkb),  # track_persona's
        "guarded_llm_outputs": guarded, "valid": valid,
        **{cls.summary_key: cls.summary(records, seconds.get(name))
           for name, cls in registered_stages().items() if cls.summary_key},
        "versions": package_versions(), "python": platform.python_version(),
    }
    manifest_file = out / "manifest.json"
    write_json(manifest_file, manifest)
    return RunOutcome(run, records, run_file, trec_file, manifest_file, now[0], valid)


def _index_manifest(index: str | Path | None) -> dict[str, Any] | None:
    """The index's manifest; for a foreign Lucene index, what was detected in it."""
    from ikatkit.index.lucene import MANIFEST, is_lucene_folder, open_index

    if index is None:
        return None
    if (Path(index) / MANIFEST).exists():
        return json.loads((Path(index) / MANIFEST).read_text(encoding="utf-8"))
    return open_index(index).describe() if is_lucene_folder(index) else None
