"""Run configs: a TOML file naming resources (LLMs, rankers, BM25) and the list of stages over them.

``load_config`` checks everything it can before any model or index opens: the types of top-level keys,
resource kinds and options, stage options (names and types, from each stage's signature), the resource each
stage will use (:mod:`ikatkit.pipelines.resources`), and the stage order against the stages' declared reads and
writes (:mod:`ikatkit.pipelines.base`). Stages come from the registry (:mod:`ikatkit.pipelines.registry`).
"""

from __future__ import annotations

import inspect
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.suggest import did_you_mean, path_fix
from ikatkit.pipelines.base import INITIAL_FIELDS, StagePosition, Stage
from ikatkit.pipelines.options import TableView, check_options, fits
from ikatkit.pipelines.registry import stage_class, stages
from ikatkit.pipelines.resources import (PARAMS, Resource, Where, build_resource, resource, stage_resources,
                                         texts_of)

TOP_LEVEL = {"name": str, "run_type": str, "description": str, "team_id": str, "batch_size": int, "threads": int,
             "resources": dict, "stages": list}


@dataclass(frozen=True, eq=False)
class StageSpec(TableView):
    """One checked ``[[stages]]`` table: its class, its options as written and the resource each resource
    parameter uses (``{"searcher": "bm25", "llm": None}``, None for one left unset). Read as a mapping it is the
    table as written (``spec["stage"]``, ``spec["k"]``, ``dict(spec)``)."""

    cls: type[Stage]
    options: Mapping[str, Any]
    resources: Mapping[str, str | None]

    @property
    def name(self) -> str:
        return self.cls.name

    @property
    def resolved(self) -> dict[str, Any]:
        """The options with every resource parameter's resource name (what the checks of the order see)."""
        return {**self.options, **self.resources}

    def _table(self) -> dict[str, Any]:
        return {"stage": self.name, **self.options}


@dataclass(frozen=True)
class RunConfig:
    """A parsed, checked run config. ``stages`` are checked specs; change them only with :func:`with_stages`, which
    checks them again. ``toml`` is the file's top level without ``stages``; :attr:`raw` is the config as a TOML
    table (kept in the run's manifest and fingerprint); ``resources`` are checked records, each read as its table."""

    name: str
    run_type: str
    resources: dict[str, Resource]
    stages: tuple[StageSpec, ...]
    batch_size: int = 16
    team_id: str = ""
    description: str = ""
    path: Path | None = None
    toml: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None

    @property
    def raw(self) -> dict[str, Any]:
        """The config as a TOML table: the file's top level with the stages as they are now."""
        return {**self.toml, "stages": [dict(spec) for spec in self.stages]}

    def names(self) -> list[str]:
        """The stages' names, in order."""
        return [spec.name for spec in self.stages]


def load_config(path: str | Path) -> RunConfig:
    """Read and check a run config; every mistake is one IkatError naming the file, the key and the fix."""
    from ikatkit.runs.model import RUN_TYPES

    path = Path(path)
    if not path.is_file():
        raise IkatError("config not found", path=path, fix=path_fix(path, "pass one of the files in configs/"))
    text = path.read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise IkatError(f"invalid TOML: {err}", path=path, fix="check the config's syntax") from None
    for key in ("name", "stages"):
        if key not in raw:
            raise IkatError(f"missing {key!r}", path=path, fix="see configs/demo.toml for the shape of a config")
    for key, value in raw.items():
        if key not in TOP_LEVEL:
            raise IkatError(f"unknown key {key!r}", path=path, where=key,
                            fix=did_you_mean(key, TOP_LEVEL, f"use only {sorted(TOP_LEVEL)}"))
        if not fits(value, TOP_LEVEL[key]):
            raise IkatError(f"{key} = {value!r} is not a {TOP_LEVEL[key].__name__}", path=path, where=key,
                            fix="see configs/demo.toml")
    for key in ("batch_size", "threads"):
        if key in raw and raw[key] < 1:
            raise IkatError(f"{key} = {raw[key]} is not a positive integer", path=path, where=key,
                            fix=f"set {key} to 1 or more")
    run_type = raw.get("run_type", "automatic")
    if run_type not in RUN_TYPES:
        raise IkatError(f"unknown run_type {run_type!r}", path=path, where="run_type", fix=f"use one of {RUN_TYPES}")
    resources = {name: _resource(path, name, spec) for name, spec in raw.get("resources", {}).items()}
    top = {key: value for key, value in raw.items() if key != "stages"}
    config = RunConfig(raw["name"], run_type, resources, (), raw.get("batch_size", 16), raw.get("team_id", ""),
                       raw.get("description", ""), path, top, raw.get("threads"))
    return _with_checked_stages(config, raw["stages"], text)


def with_stages(config: RunConfig, tables: Sequence[Mapping[str, Any]]) -> RunConfig:
    """``config`` with ``tables`` (``{"stage": name, **options}``, or specs) as its stages, checked as
    :func:`load_config` checks a file's: the one way to edit a config's stages (``--queries``, ``--track-persona``,
    training loops)."""
    return _with_checked_stages(config, tables, "")


def _with_checked_stages(config: RunConfig, tables: Sequence[Any], text: str) -> RunConfig:
    """Each table's class, options and resources checked, then the order (``text``: the file, for line numbers)."""
    path, specs = config.path, []
    for i, stage in enumerate(tables):
        where = f"stages[{i}]"
        if not isinstance(stage, Mapping):
            raise IkatError(f"stage {stage!r} is not a table", path=path, where=where,
                            fix='write each stage as [[stages]] with stage = "..." and its options')
        try:
            named = stage.get("stage")
            cls = stage_class(named if isinstance(named, str) else repr(named))
        except IkatError as err:
            raise IkatError(err.message, path=path, where=where, fix=err.fix) from None
        options = {k: v for k, v in stage.items() if k != "stage"}
        resolved = _check_stage_options(path, where, cls, options, config.resources)
        try:
            cls.check(resolved, config.run_type)
        except IkatError as err:
            place = stage_line(text, i, err.where) if err.where else f"{where} ({cls.name})"
            raise IkatError(err.message, path=path, where=place, fix=err.fix) from None
        specs.append(StageSpec(cls, options, {k: v for k, v in resolved.items() if k in PARAMS}))
    check_order([(spec.cls, spec.resolved) for spec in specs], path, config.resources)
    return replace(config, stages=tuple(specs))


def _resource(path: Path, name: str, spec: Any) -> Resource:
    try:
        return resource(name, spec)
    except IkatError as err:
        where = f"resources.{name}" + (f".{err.where}" if err.where else "")
        raise IkatError(err.message, path=path, where=where, fix=err.fix) from None


def _check_stage_options(path: Path | None, where: str, cls: type[Stage], options: dict[str, Any],
                         resources: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A stage's options checked against its signature, with the resource each parameter will use (or None)."""
    accepted = inspect.signature(cls.__init__).parameters
    plain = {k: v for k, v in options.items() if k not in PARAMS or k not in accepted}
    if "texts" in accepted and "searcher" not in accepted:  # configs written before texts: the searcher's texts
        plain.pop("searcher", None)
    try:
        check_options(cls.__init__, plain, PARAMS)
        kept = {k: v for k, v in options.items() if k not in PARAMS or k in accepted}  # `searcher`: the texts'
        return {**kept, **stage_resources(cls, options, resources)}
    except IkatError as err:
        place = f"{where}.{err.where}" if err.where else where
        raise IkatError(err.message, path=path, where=f"{place} ({cls.name})", fix=err.fix) from None


def check_order(placed: list[tuple[type[Stage], dict[str, Any]]], path: Path | None = None,
                resources: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Every field a stage requires is provided by an earlier stage (or set when the record is made); no field a
    stage reads in order (``ordered_reads``) is set only by a later stage; each stage's ``check_placement`` passes.

    A stage's ``single_list_provides`` count only while each turn has one candidate list: generated queries or a
    second retrieve stage make several, which ``fuse`` merges into the ranking."""
    available = set(INITIAL_FIELDS)
    several = False
    for i, (cls, options) in enumerate(placed):
        where = f"stages[{i}] ({cls.name})"
        missing = [f for f in cls.requires if f not in available]
        if missing:
            producers = sorted(n for n, c in stages().items()
                               if missing[0] in (*c.provides, *c.single_list_provides))
            hint = (" (each turn has several candidate lists: generated queries or several retrieve stages)"
                    if missing[0] == "ranking" and several else "")
            fix = "put 'fuse' before it" if hint else f"put one of {producers} before it"
            raise IkatError(f"stage {cls.name!r} needs {missing[0]!r}, which no earlier stage provides{hint}",
                            path=path, where=where, fix=fix)
        for read in cls.ordered_reads(options):
            later = next((j for j in range(i + 1, len(placed)) if read in placed[j][0].provides), None)
            if read not in available and later is not None:
                producer = placed[later][0].name
                raise IkatError(f"stage {cls.name!r} reads {read!r}, which {producer!r} (stages[{later}]) sets only "
                                f"after it: {cls.name!r} would run without it", path=path, where=where,
                                fix=f"put {producer!r} before {cls.name!r}")
        kinds = {param: (resources or {}).get(name, {}).get("kind") if name else None
                 for param, name in options.items() if param in PARAMS}
        try:
            cls.check_placement(options, StagePosition(frozenset(available), kinds))
        except IkatError as err:
            raise IkatError(err.message, path=path, where=where, fix=err.fix) from None
        if "candidates" in cls.provides:
            several = several or "candidates" in available or "queries" in available
            if several:
                available.discard("ranking")
        available.update(cls.provides)
        if not several:
            available.update(cls.single_list_provides)


def stage_line(text: str, index: int, key: str) -> str:
    """``stages[i].key, line N``: the line of the config's ``index``-th ``[[stages]]`` table that names the most
    parts of the dotted ``key`` (the first such line; the table's header when none does)."""
    lines = text.splitlines()
    starts = [n for n, line in enumerate(lines) if line.strip().startswith("[[stages]]")]
    label = f"stages[{index}]" + (f".{key}" if key else "")
    if index >= len(starts):
        return label
    end = next((n for n in starts if n > starts[index]), len(lines))
    parts = [re.compile(rf"(?<![\w-]){re.escape(p)}(?![\w-])") for p in key.split(".") if p]
    best, found = starts[index], 0
    for n in range(starts[index] + 1, end):
        hits = sum(bool(p.search(lines[n].split("#")[0])) for p in parts)
        if hits > found:
            best, found = n, hits
    return f"{label}, line {best + 1}"


class Resources:
    """Builds each declared resource once, on first use, so unused models are never loaded."""

    def __init__(self, config: RunConfig, index: str | Path | None, cache_dir: Path) -> None:
        self.config, self.index, self.cache_dir = config, index, cache_dir
        self.built: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        if name not in self.built:
            self.built[name] = build_resource(name, self.config.resources[name],
                                              Where(self.index, self.cache_dir, self.config.path))
        return self.built[name]

    @property
    def stats(self) -> dict[str, Any]:
        """Cache and usage statistics of the resources that were built (a searcher's: what searched)."""
        return {name: dict(getattr(obj, "stats", {}) or {}) for name, obj in self.built.items()
                if getattr(obj, "stats", None) is not None}


def build_stages(config: RunConfig, resources: Resources,
                 overrides: Mapping[str, Mapping[str, Any]] | None = None) -> list[Stage]:
    """Instantiate the config's stages, resolving resource names to built objects; each stage's
    ``resource_names`` is set to ``{parameter: resource name}`` (see :class:`~ikatkit.pipelines.base.Stage`).
    ``overrides`` (stage name -> constructor options) changes how some stages are built, not the config: a
    training loop builds the stage it trains without the file it is about to write."""
    built: list[Stage] = []
    for i, spec in enumerate(config.stages):
        names = {param: name for param, name in spec.resources.items() if name}
        params = {**{k: v for k, v in spec.options.items() if k not in PARAMS}, **(overrides or {}).get(spec.name, {}),
                  **{param: texts_of(config.resources[name], resources.get(name)) if param == "texts"
                     else resources.get(name) for param, name in names.items()}}
        try:
            stage = spec.cls(**params)
        except IkatError as err:
            if err.path is not None:
                raise
            raise IkatError(err.message, path=config.path, where=f"stages[{i}] ({spec.name})", fix=err.fix) from None
        stage.resource_names = names
        built.append(stage)
    return built
