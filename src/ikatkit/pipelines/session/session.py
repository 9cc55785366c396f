"""One run's output folder, owned in one place: :class:`RunSession`.

A session is entered once per run (``with RunSession(config, out, ...) as session``): it checks the config
(:func:`~ikatkit.pipelines.preflight.preflight`: every model, extra, GPU option and server, in seconds, before
anything loads), sets the cache root (:func:`~ikatkit.paths.cache_at`) and holds ``out/run.lock``
(:func:`~ikatkit.lock.run_lock`). Inside it the session gives the run's fingerprint (:meth:`parts`, models
included), its per-turn record store (:attr:`store`, :mod:`ikatkit.pipelines.session.store`), the pipeline built
once and bound to ``out`` (:meth:`pipeline`), the records written as a run and its TREC view and validated
(:meth:`write_run`), and the manifest of one schema (:mod:`ikatkit.pipelines.session.manifest`). The drivers only feed
turns: ``run`` by topic batches (:mod:`ikatkit.pipelines.runner`), ``interactive`` by API messages
(:mod:`ikatkit.interactive.driver`), ``robustness`` one session per profile, training a session without writers
(``out`` None: no lock, no store).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ikatkit.atomic import write_json, write_text
from ikatkit.lock import run_lock
from ikatkit.paths import cache_at, cache_root
from ikatkit.pipelines.config import RunConfig
from ikatkit.pipelines.fingerprint import fingerprint, fingerprint_parts
from ikatkit.pipelines.pipeline import Pipeline
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.registry import stages as registered_stages
from ikatkit.runs.model import Run
from ikatkit.pipelines.session.manifest import NO_PASSAGES, common_part
from ikatkit.pipelines.session.store import TurnStore
from ikatkit.topics import Topics

if TYPE_CHECKING:
    from ikatkit.runs.validate import Problem, ValidationReport


@dataclass
class Outcome:
    """What a session wrote and did; :meth:`summary` comes from the manifest in memory."""

    manifest: dict[str, Any]
    run: Run
    records: list[TurnRecord]
    run_file: Path
    trec_file: Path
    manifest_file: Path
    valid: bool | None
    already_complete: bool = False
    lines: list[str] = field(default_factory=list)  # the kind's own head lines of the summary
    validation: list[str] = field(default_factory=list)  # what was validated and found (validation_lines)

    @property
    def turns(self) -> int:
        return int(self.manifest["turns"])

    @property
    def computed_now(self) -> int:
        return int(self.manifest["turns_run_now"])

    @property
    def batches_done_now(self) -> int:
        return int(self.manifest.get("batches_run_now", 0))

    @property
    def dump_file(self) -> Path:
        return self.run_file

    def summary(self) -> str:
        """A few lines for the terminal: turns, time, files, turns without passages, notes, validity."""
        m = self.manifest
        lines = list(self.lines)
        if m["turns_without_passages"]:
            lines.append(f"  WARNING: {m['turns_without_passages']} of {m['turns']} turns have no passages")
        notes = {n: c for n, c in m["notes"].items() if n != NO_PASSAGES}
        if notes:
            lines.append("  notes: " + "; ".join(f"{n} x{c}" for n, c in notes.items()))
        return "\n".join(lines + self.validation)


def _counts(problems: list[Problem]) -> str:
    """``15 warnings (no-ptkb x15)``-like counts of ``problems`` of one severity, by kind."""
    kinds: dict[str, int] = {}
    for problem in problems:
        kinds[problem.code] = kinds.get(problem.code, 0) + problem.count
    total = sum(kinds.values())
    what = f"{problems[0].severity}{'s' * (total != 1)}" if problems else ""
    return f"{total} {what} (" + ", ".join(f"{code} x{n}" for code, n in kinds.items()) + ")"


def validation_lines(report: ValidationReport, topics: Topics, file: Path) -> list[str]:
    """The summary's validation lines: valid or not, over which turns, the errors and warnings counted by kind (as
    ``file`` lists them); for a run of some conversations (:meth:`Topics.subset`), what it lacks as an official run
    of the whole topic file."""
    found = [_counts(group) for group in (report.errors, report.warnings) if group]
    scope = ""
    if topics.whole is not None:
        scope = f" for the {len(topics.conversations)} conversations run ({len(topics)} turns)"
    lines = [f"  validation:   {'valid' if report.ok else 'INVALID'}{scope}" + (", " if found else "")
             + ", ".join(found) + f" (see {file})"]
    missing = topics.whole - len(topics) if topics.whole is not None else 0
    if missing:
        lines.append(f"                as an official run it misses {missing} of the topics' {topics.whole} turns "
                     f"(`ikatkit validate` of it: INVALID, missing-turn x{missing})")
    return lines


class RunSession:
    """A run's folder ``out`` (None: a session without writers, e.g. training) for ``config``; ``store`` names the
    folder of the per-turn record store (``checkpoints`` for ``run``, ``turns`` for ``interactive``); ``fresh`` the
    fix when the store refuses the folder, in the driving command's options (:class:`TurnStore`)."""

    def __init__(self, config: RunConfig, out: str | Path | None, *, index: str | Path | None = None,
                 cache_dir: str | Path | None = None, store: str = "checkpoints",
                 fresh: str = "use a new --out") -> None:
        self.config, self.index, self.cache_dir = config, index, cache_dir
        self.out = Path(out) if out is not None else None
        self.store = TurnStore(self.out / store, store, fresh) if self.out is not None else None
        self._stack = ExitStack()
        self._pipeline: Pipeline | None = None
        self._validation: list[str] = []

    def __enter__(self) -> RunSession:
        from ikatkit.pipelines.preflight import preflight

        preflight(self.config)  # every model, GPU option and server the config names, before anything loads
        self._stack.enter_context(cache_at(self.cache_dir))
        if self.out is not None:
            self._stack.enter_context(run_lock(self.out))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stack.close()

    # ------------------------------------------------------------ inputs

    def parts(self, records: list[dict[str, Any]], year: int, models: bool = True) -> dict[str, str]:
        """The fingerprint's parts: a digest per input that changes outputs (``models``: each model's identity)."""
        return fingerprint_parts(self.config.raw, records, year, self.index, cache_root() / "digests", models)

    @staticmethod
    def fingerprint(parts: dict[str, str]) -> str:
        return fingerprint(parts)

    def pipeline(self, config: RunConfig | None = None, **overrides: dict[str, Any]) -> Pipeline:
        """The config's pipeline (or ``config``'s, a part of it), resources built once, stages bound to ``out``;
        ``overrides``: stage name -> options (:func:`~ikatkit.pipelines.config.build_stages`)."""
        if config is not None:
            return Pipeline.from_config(config, self.index, self.out, overrides or None)
        if self._pipeline is None:
            self._pipeline = Pipeline.from_config(self.config, self.index, self.out)
        return self._pipeline

    @property
    def resource_stats(self) -> dict[str, Any]:
        return self._pipeline.stats if self._pipeline else {}

    # ------------------------------------------------------------ outputs

    def write_run(self, run: Run, fmt: str | None, name: str, topics: Topics | None,
                  validate: bool = True) -> tuple[Path, Path, bool | None]:
        """Write ``run`` as ``name`` in the official ``fmt`` (None: written by the caller) and as ``name.trec``;
        validate it against ``topics`` into ``validation.txt`` (None when not validated)."""
        from ikatkit.runs.io import write_run

        assert self.out is not None, "a session without writers writes no run"
        run_file, trec_file = self.out / name, self.out / f"{Path(name).stem}.trec"
        if fmt is not None:
            write_run(run, run_file, fmt)
        write_run(run, trec_file, "trec")
        if not validate or topics is None:
            return run_file, trec_file, None
        from ikatkit.runs.validate import validate_run

        report = validate_run(run if fmt is not None else run_file, topics)
        write_text(self.out / "validation.txt", str(report) + "\n")
        self._validation = validation_lines(report, topics, self.out / "validation.txt")
        return run_file, trec_file, report.ok

    def finish(self, *, kind: str, run: Run, records: list[TurnRecord], files: tuple[Path, Path],
               valid: bool | None, seconds: dict[str, float], now: tuple[int, float], topics: str | None,
               parts: dict[str, str], own: dict[str, Any], lines: list[str] | None = None,
               already_complete: bool = False) -> Outcome:
        """Write ``manifest.json`` (the common part, then ``own``: the kind's keys) and return the outcome;
        ``now``: the turns this call computed and their stage seconds."""
        assert self.out is not None, "a session without writers writes no manifest"
        summaries = {cls.summary_key: cls.summary(records, seconds.get(name))
                     for name, cls in registered_stages().items() if cls.summary_key}
        manifest = {**common_part(kind=kind, run_name=run.run_name, records=records, config=self.config,
                                  topics=topics, index=self.index, fingerprint=fingerprint(parts),
                                  files={"run": files[0].name, "trec": files[1].name}, seconds=seconds,
                                  turns_now=now[0], seconds_now=now[1], resource_stats=self.resource_stats,
                                  valid=valid, summaries=summaries), **own}
        manifest_file = self.out / "manifest.json"
        write_json(manifest_file, manifest)
        return Outcome(manifest, run, records, files[0], files[1], manifest_file, valid, already_complete,
                       list(lines or []), self._validation)
