"""Run a configured pipeline over topics: batched, checkpointed per batch of turns, resumable.

Batches are fixed chunks of the topics' turns in order, and a batch's records are written as one
atomic checkpoint file (a unit of the session's record store, :mod:`ikatkit.pipelines.session.store`), so a run
killed at any point and restarted redoes only unfinished batches, with the same batch composition, and writes
byte-identical run files. The run folder (lock, cache scope, preflight, fingerprint, the run files, validation and
manifest) is the :class:`~ikatkit.pipelines.session.RunSession`'s: the fingerprint (``checkpoints/fingerprint.json``) is
checked before anything loads and again with the models' identities, and written just before the first batch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.llm.guards import held_refusals
from ikatkit.pipelines.config import RunConfig, load_config
from ikatkit.pipelines.pipeline import Pipeline
from ikatkit.pipelines.queries import pin_query_files
from ikatkit.pipelines.record import TurnRecord, records_for
from ikatkit.runs.templates import SUFFIX as RUN_SUFFIX
from ikatkit.pipelines.session import Outcome, RunSession, to_run
from ikatkit.pipelines.session.store import batch_unit
from ikatkit.progress import Progress
from ikatkit.topics import Topics, load_topics

RunOutcome = Outcome  # the name of the Python API's result


def run_pipeline(config: RunConfig | str | Path, topics: Topics | str | Path, out: str | Path, *,
                 index: str | Path | None = None, cache_dir: str | Path | None = None, validate: bool = True,
                 restart: bool = False, max_batches: int | None = None, fresh: str = "use a new --out") -> Outcome:
    """Run ``config`` over ``topics`` into ``out``; resume from its checkpoints unless ``restart``; ``fresh`` is the
    fix when ``out`` holds checkpoints of other inputs, in the calling command's options.

    ``cache_dir`` is the cache root for everything the run caches (:func:`ikatkit.paths.cache_at`; default
    :func:`ikatkit.paths.cache_root`). ``max_batches`` stops after that many new batches (used to test
    kill-and-resume).
    """
    config = config if isinstance(config, RunConfig) else load_config(config)
    topics = topics if isinstance(topics, Topics) else load_topics(topics)
    config = pin_query_files(config, topics.qids)
    out = Path(out)
    with RunSession(config, out, index=index, cache_dir=cache_dir, fresh=fresh) as session:
        return _run(session, topics, out, validate, restart, max_batches)


def _run(session: RunSession, topics: Topics, out: Path, validate: bool, restart: bool,
         max_batches: int | None) -> Outcome:
    config, store = session.config, session.store
    assert store is not None
    if restart:
        store.clear()
    records = records_for(topics)
    raw_records = [r.to_json() for r in records]
    store.check(session.parts(raw_records, topics.year, models=False))  # before anything loads
    size = config.batch_size
    batches = [records[i: i + size] for i in range(0, len(records), size)]
    pending = [i for i in range(len(batches)) if not store.done(batch_unit(i))]
    pipeline = session.pipeline() if pending else Pipeline([], config)
    pipeline.check(records)
    parts = session.parts(raw_records, topics.year)
    store.check(parts)
    if pending:
        store.write_stamp(parts)
    done_turns = len(records) - sum(len(batches[i]) for i in pending)
    per_stage = sys.stderr.isatty()  # a bar per stage on a terminal; one bar, printed every 30 s, in logs
    bars = ([Progress(f"{s.name:>16}", "turn", len(records), initial=done_turns, position=p)
             for p, s in enumerate(pipeline.stages)] if per_stage else
            [Progress("turns", "turn", len(records), initial=done_turns)])
    done_now, turns_now, seconds_now = 0, 0, 0.0
    with held_refusals() as held:  # the guards' warnings would land amid the bars: one line after them
        try:
            for i in pending:
                if max_batches is not None and done_now >= max_batches:
                    break
                at_work = _at_work(pipeline, bars, per_stage, f"batch {i + 1} of {len(batches)}"
                                   + (" (the first: models load on first use)" if done_now == 0 else ""))
                batch = pipeline(batches[i], at_work)
                if not per_stage:
                    bars[0].update(len(batch))
                store.save(batch_unit(i), {"batch": i, "qids": [r.qid for r in batch], "seconds": pipeline.seconds,
                                           "records": [r.to_json() for r in batch]})
                done_now, turns_now = done_now + 1, turns_now + len(batch)
                seconds_now += sum(pipeline.seconds.values())
        except KeyboardInterrupt:  # a stop (ikatkit.stopping.Stopped) or Ctrl-C in the API: what is kept, then on
            saved = len(records) - sum(len(batches[i]) for i in range(len(batches)) if not store.done(batch_unit(i)))
            print(f"run {config.name}: stopped; {saved} of {len(records)} turns saved ({turns_now} now) in "
                  f"{store.dir}; the batch at work is dropped", file=sys.stderr)
            raise
        for bar in bars:
            bar.close()
    if held.line():
        print(held.line(), file=sys.stderr)
    if not all(store.done(batch_unit(i)) for i in range(len(batches))):
        raise IkatError(f"run stopped after {done_now} new batches; rerun to resume", path=out)
    finished: list[TurnRecord] = []
    seconds: dict[str, float] = {}  # every turn's, whichever call ran it
    for i in range(len(batches)):
        kept = store.load(batch_unit(i)) or {}
        finished.extend(TurnRecord.from_json(r) for r in kept["records"])
        for name, value in kept["seconds"].items():
            seconds[name] = seconds.get(name, 0.0) + value
    own = {record.qid: set(topics.conversation_of(record.qid).ptkb) for record in finished}
    run = to_run(finished, config.name, config.run_type, topics.year, config.team_id, ptkb_keys=own)
    run_file, trec_file, valid = session.write_run(run, str(topics.year), f"{config.name}{RUN_SUFFIX[topics.year]}",
                                                   topics, validate)
    now = (f"{turns_now} turns run now in {done_now} batches, {seconds_now / turns_now:.2f} s/turn" if turns_now
           else "nothing run now") + (f"; {len(finished) - turns_now} turns from the checkpoints of an earlier run"
                                      if turns_now < len(finished) else "")
    return session.finish(
        kind="run", run=run, records=finished, files=(run_file, trec_file), valid=valid, seconds=seconds,
        now=(turns_now, seconds_now), topics=str(topics.path) if topics.path else None, parts=parts,
        own={"run_type": config.run_type, "year": topics.year, "index_manifest": _index_manifest(session.index),
             "batches_run_now": done_now,
             "ptkb_not_cited": sum(key not in own[r.qid] for r in finished for key, _ in r.ptkb)},  # track_persona's
        lines=[f"run {config.name}: {len(finished)} turns; {now}", f"  official run: {run_file}",
               f"  TREC run:     {trec_file}", f"  manifest:     {out / 'manifest.json'}"])


def _at_work(pipeline: Pipeline, bars: list[Progress], per_stage: bool,
             batch: str) -> Callable[[int, list[TurnRecord]], None]:
    """Name the stage at work on ``batch`` (its first now; the next after each one) on the bars, and count a stage's
    finished turns on its own bar (a bar per stage); returns the pipeline's ``after_stage``."""
    names = [stage.name for stage in pipeline.stages]

    def say(stage: int) -> None:
        if per_stage:
            for p, bar in enumerate(bars):
                bar.now(batch if p == stage else None)
        elif stage < len(names):
            bars[0].now(f"{names[stage]} on {batch}")

    def after_stage(stage: int, done: list[TurnRecord]) -> None:
        if per_stage:
            bars[stage].update(len(done))
        say(stage + 1)

    say(0)
    return after_stage


def _index_manifest(index: str | Path | None) -> dict | None:
    """The index's manifest; for a foreign Lucene index, what was detected in it."""
    import json

    from ikatkit.index.lucene import is_lucene_folder, lucene_info
    from ikatkit.index.manifest import MANIFEST

    if index is None:
        return None
    if (Path(index) / MANIFEST).exists():
        return json.loads((Path(index) / MANIFEST).read_text(encoding="utf-8"))
    return lucene_info(index).describe() if is_lucene_folder(index) else None
