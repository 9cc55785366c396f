"""One driver of stages: a :class:`Pipeline` built once from a checked config, called on batches of turn records.

``ikatkit run`` (:mod:`ikatkit.pipelines.runner`), ``ikatkit interactive`` (:mod:`ikatkit.interactive.driver`),
training loops (:mod:`ikatkit.training.refiner`) and studies (:mod:`ikatkit.studies.context`) all drive stages
through it, so each gets the same: torch's thread count from the config, the resources built once (on first use),
each stage bound to the run's output folder, the whole-topic checks with errors located in the config
(``stages[i] (name)``), the stage contracts enforced after every transform (:func:`run_stage`) and the seconds
each stage took.
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.paths import cache_root
from ikatkit.placement import torch_threads
from ikatkit.pipelines.base import Stage
from ikatkit.pipelines.config import Resources, RunConfig, build_stages
from ikatkit.pipelines.record import TurnRecord

RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(TurnRecord))


def run_stage(stage: Stage, records: list[TurnRecord]) -> list[TurnRecord]:
    """``stage.transform(records)`` with its contract enforced: the same turns come back in order, and no field
    the stage does not declare (``provides`` and the shared ``notes``/``rejected``) changed on any of them."""
    return _enforced(stage, records, stage.transform)


def train_stage(stage: Stage, records: list[TurnRecord], references: dict[str, str],
                respond: Callable[[list[TurnRecord]], list[TurnRecord]]) -> list[Any]:
    """``stage.train(records, references, respond)`` (:meth:`Stage.train`) with the contract :func:`run_stage`
    enforces on the records it works on; what it returns."""
    learned: list[Any] = []

    def train(batch: list[TurnRecord]) -> list[TurnRecord]:
        learned.extend(stage.train(batch, references, respond))
        return batch

    _enforced(stage, records, train)
    return learned


def _enforced(stage: Stage, records: list[TurnRecord],
              step: Callable[[list[TurnRecord]], list[TurnRecord]]) -> list[TurnRecord]:
    watched = [f for f in RECORD_FIELDS if f not in type(stage).declared()]
    before = pickle.loads(pickle.dumps([[getattr(r, f) for f in watched] for r in records]))  # a fast deep copy
    qids = [r.qid for r in records]
    out = step(records)
    if [r.qid for r in out] != qids:
        raise IkatError(f"stage {stage.name!r} returned turns {[r.qid for r in out][:5]} for {qids[:5]}",
                        fix=f"{type(stage).__qualname__}.transform must return the records it was given, in order")
    for record, values in zip(out, before):
        for name, value in zip(watched, values):
            if getattr(record, name) != value:
                raise IkatError(f"stage {stage.name!r} changed {name!r} of turn {record.qid}, a field it does not "
                                "declare",
                                fix=f"add {name!r} to {type(stage).__qualname__}.provides, or leave it alone")
    return out


class Pipeline:
    """Stages in order over batches of records: ``pipeline(records) -> records``; :attr:`seconds` holds each
    stage's time in the last call. Build it from a config with :meth:`from_config`, or from stage objects (a
    study's hand-made stages) with ``Pipeline(stages)``."""

    def __init__(self, stages: Sequence[Stage], config: RunConfig | None = None,
                 resources: Resources | None = None) -> None:
        self.stages, self.config, self.resources = list(stages), config, resources
        self.seconds: dict[str, float] = {}

    @classmethod
    def from_config(cls, config: RunConfig, index: str | Path | None = None, out: Path | None = None,
                    overrides: Mapping[str, Mapping[str, Any]] | None = None) -> Pipeline:
        """The config's stages over its resources (built on first use, cached under :func:`cache_root`), each
        stage run on the config's ``threads`` (PyTorch's, for the stage's call, :meth:`__call__`), and every stage
        bound to ``out`` (where a stage keeps files of its own); ``overrides``: see
        :func:`~ikatkit.pipelines.config.build_stages`."""
        resources = Resources(config, index, cache_root())
        stages = build_stages(config, resources, overrides)
        if out is not None:
            for stage in stages:
                stage.bind_out(out)
        return cls(stages, config, resources)

    def check(self, records: Sequence[TurnRecord]) -> None:
        """Every stage's whole-topic checks (:meth:`Stage.check_records`) before any batch runs; an error names the
        stage's place in the config."""
        for i, stage in enumerate(self.stages):
            try:
                stage.check_records(records)
            except IkatError as err:
                raise IkatError(err.message, path=self.config.path if self.config else None,
                                where=f"stages[{i}] ({stage.name})", fix=err.fix) from None

    def __call__(self, records: list[TurnRecord],
                 after_stage: Callable[[int, list[TurnRecord]], None] | None = None) -> list[TurnRecord]:
        """The records through every stage, contracts enforced; ``after_stage(i, records)`` after stage ``i``."""
        seconds: dict[str, float] = {}
        for i, stage in enumerate(self.stages):
            start = time.perf_counter()
            with torch_threads(self.config.threads if self.config else None):  # the config's, for the stage's call
                records = run_stage(stage, records)
            seconds[stage.name] = seconds.get(stage.name, 0.0) + time.perf_counter() - start
            if after_stage is not None:
                after_stage(i, records)
        self.seconds = seconds
        return records

    @property
    def stats(self) -> dict[str, Any]:
        """Cache and usage statistics of the resources that were built (empty for hand-made stages)."""
        return self.resources.stats if self.resources else {}


def tally(records: Iterable[TurnRecord]) -> tuple[dict[str, int], dict[str, int]]:
    """How many turns carry each note, and how many turns had each stage's LLM output guarded (``rejected``)."""
    notes: dict[str, int] = {}
    guarded: dict[str, int] = {}
    for record in records:
        for note in record.notes:
            notes[note] = notes.get(note, 0) + 1
        for stage in record.rejected:
            guarded[stage] = guarded.get(stage, 0) + 1
    return notes, guarded
