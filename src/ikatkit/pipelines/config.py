"""Run configs: a TOML file naming resources (LLMs, rankers, BM25) and the list of stages over them.

``load_config`` checks everything it can before any model or index opens: the types of top-level keys,
resource kinds and options, stage options (names and types, from each stage's signature), the resource each
stage will use, and the stage order against the stages' ``requires``/``provides`` contracts.
"""

from __future__ import annotations

import inspect
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.pipelines.stages import INITIAL_FIELDS, STAGES, Stage

RANKER_KINDS = ("bi-encoder", "cross-encoder")
PARAM_KINDS = {"llm": ("llm",), "ranker": RANKER_KINDS, "searcher": ("bm25", "dense", "partitioned-bm25")}
RESOURCE_PARAMS = tuple(PARAM_KINDS)
TOP_LEVEL = {"name": str, "run_type": str, "description": str, "team_id": str, "batch_size": int, "threads": int,
             "resources": dict, "stages": list}


@dataclass
class RunConfig:
    """A parsed run config; ``raw`` is the TOML as read (kept in the run's manifest)."""

    name: str
    run_type: str
    resources: dict[str, dict[str, Any]]
    stages: list[dict[str, Any]]
    batch_size: int = 16
    team_id: str = ""
    description: str = ""
    path: Path | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None


def load_config(path: str | Path) -> RunConfig:
    """Read and check a run config; every mistake is one IkatError naming the file, the key and the fix."""
    from ikatkit.runs.model import RUN_TYPES

    path = Path(path)
    if not path.is_file():
        raise IkatError("config not found", path=path, fix="pass one of the files in configs/")
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
            raise IkatError(f"unknown key {key!r}", path=path, where=key, fix=f"use only {sorted(TOP_LEVEL)}")
        if not _fits(value, TOP_LEVEL[key]):
            raise IkatError(f"{key} = {value!r} is not a {TOP_LEVEL[key].__name__}", path=path, where=key,
                            fix="see configs/demo.toml")
    for key in ("batch_size", "threads"):
        if key in raw and raw[key] < 1:
            raise IkatError(f"{key} = {raw[key]} is not a positive integer", path=path, where=key,
                            fix=f"set {key} to 1 or more")
    run_type = raw.get("run_type", "automatic")
    if run_type not in RUN_TYPES:
        raise IkatError(f"unknown run_type {run_type!r}", path=path, where="run_type", fix=f"use one of {RUN_TYPES}")
    resources = raw.get("resources", {})
    for name, spec in resources.items():
        _check_resource(path, name, spec)
    classes = []
    for i, stage in enumerate(raw["stages"]):
        where = f"stages[{i}]"
        if not isinstance(stage, dict) or stage.get("stage") not in STAGES:
            name = stage.get("stage") if isinstance(stage, dict) else stage
            raise IkatError(f"unknown stage {name!r}", path=path, where=where, fix=f"use one of {sorted(STAGES)}")
        cls = STAGES[stage["stage"]]
        options = _check_stage_options(path, where, cls, stage, resources)
        if hasattr(cls, "check"):
            try:
                cls.check(options, run_type)
            except IkatError as err:
                place = stage_line(text, i, err.where) if err.where else f"{where} ({cls.name})"
                raise IkatError(err.message, path=path, where=place, fix=err.fix) from None
        classes.append(cls)
    check_order(classes, path)
    return RunConfig(raw["name"], run_type, resources, raw["stages"], raw.get("batch_size", 16),
                     raw.get("team_id", ""), raw.get("description", ""), path, raw, raw.get("threads"))


def _fits(value: Any, hint: Any) -> bool:
    """Whether a TOML value fits a type hint (ints are floats, bools are not ints, str is a Path)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    hint = typing.get_origin(hint) or hint
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is Path:
        return isinstance(value, str)
    return not isinstance(hint, type) or isinstance(value, hint)


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _check_options(path: Path, where: str, function: Any, options: dict[str, Any], skip: tuple[str, ...]) -> None:
    """Options against a constructor's signature: known names, values of the annotated types."""
    signature = inspect.signature(function)
    accepted = {n: p for n, p in signature.parameters.items() if n not in ("self", *skip)
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    try:
        hints = typing.get_type_hints(function)
    except (NameError, TypeError):
        hints = {}
    for key, value in options.items():
        if key not in accepted:
            raise IkatError(f"unknown option {key!r}", path=path, where=f"{where}.{key}",
                            fix=f"use only {sorted(accepted) or 'no options'}")
        hint = hints.get(key, inspect.Parameter.empty)
        if not _fits(value, hint):
            raise IkatError(f"{key} = {value!r} is not of type {_type_name(hint)}", path=path, where=f"{where}.{key}",
                            fix=f"give {key} a value of type {_type_name(hint)}")


def _resource_kinds() -> tuple[str, ...]:
    return tuple(dict.fromkeys(kind for kinds in PARAM_KINDS.values() for kind in kinds))


def _check_resource(path: Path, name: str, spec: Any) -> None:
    where = f"resources.{name}"
    if not isinstance(spec, dict):
        raise IkatError(f"resource {name!r} is not a table", path=path, where=where,
                        fix=f'write [resources.{name}] with kind = "..."')
    kind = spec.get("kind")
    if kind not in _resource_kinds():
        raise IkatError(f"resource {name!r} has unknown kind {kind!r}", path=path, where=f"{where}.kind",
                        fix=f"use one of {list(_resource_kinds())}")
    options = {k: v for k, v in spec.items() if k != "kind"}
    if kind == "llm":
        from ikatkit.llm import BACKENDS, _backend_class, _options

        backend = options.get("backend", "transformers")
        if backend not in BACKENDS:
            raise IkatError(f"unknown LLM backend {backend!r}", path=path, where=f"{where}.backend",
                            fix=f"use one of {BACKENDS}")
        allowed = _options(_backend_class(backend)) | {"backend", "model"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise IkatError(f"unknown option(s) {unknown} for the {backend} backend", path=path, where=where,
                            fix=f"use only {sorted(allowed)}")
    elif kind in RANKER_KINDS:
        from ikatkit.rank import KINDS

        _check_options(path, where, KINDS[kind].__init__, options, ())
    elif kind == "bm25":
        from ikatkit.retrieve.bm25 import Bm25Searcher

        _check_options(path, where, Bm25Searcher.__init__, options, ("index",))
    if kind in ("llm", *RANKER_KINDS) and not isinstance(options.get("model"), str):
        raise IkatError(f"resource {name!r} has no model", path=path, where=f"{where}.model",
                        fix='add model = "<hub id, path or bundled:...>"')


def _check_stage_options(path: Path, where: str, cls: type, stage: dict[str, Any],
                         resources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A stage's options checked against its signature, with the resource each parameter will use (or None)."""
    options = {k: v for k, v in stage.items() if k != "stage"}
    accepted = inspect.signature(cls.__init__).parameters
    plain = {k: v for k, v in options.items() if k not in RESOURCE_PARAMS or k not in accepted}
    _check_options(path, where, cls.__init__, plain, RESOURCE_PARAMS)
    for param in RESOURCE_PARAMS:
        if param not in accepted:
            continue
        fitting = [n for n, spec in resources.items() if spec.get("kind") in PARAM_KINDS[param]]
        if param in options:
            name = options[param]
            if name not in resources:
                raise IkatError(f"{param} {name!r} is not a declared resource", path=path, where=where,
                                fix=f"declare [resources.{name}]")
            if name not in fitting:
                raise IkatError(f"{param} {name!r} is a {resources[name].get('kind')!r} resource", path=path,
                                where=f"{where}.{param}", fix=f"name a resource of kind {list(PARAM_KINDS[param])}")
            continue
        required = accepted[param].default is inspect.Parameter.empty
        if len(fitting) > 1 or (required and not fitting):
            raise IkatError(f"{len(fitting)} resources fit {param!r} of stage {cls.name!r}; name the one it uses",
                            path=path, where=where, fix=f'add {param} = "<resource name>" to the stage'
                            + ("" if fitting else f" and declare a resource of kind {list(PARAM_KINDS[param])}"))
        options[param] = fitting[0] if fitting else None
    return options


def check_order(classes: list[type], path: Path | None = None) -> None:
    """Every field a stage requires is provided by an earlier stage (or set when the record is made).

    A stage's ``single_list_provides`` count only while each turn has one candidate list: generated queries or a
    second retrieve stage make several, which ``fuse`` merges into the ranking."""
    available = set(INITIAL_FIELDS)
    several = False
    for i, cls in enumerate(classes):
        missing = [f for f in cls.requires if f not in available]
        if missing:
            producers = sorted(n for n, c in STAGES.items()
                               if missing[0] in (*c.provides, *getattr(c, "single_list_provides", ())))
            hint = (" (each turn has several candidate lists: generated queries or several retrieve stages)"
                    if missing[0] == "ranking" and several else "")
            fix = "put 'fuse' before it" if hint else f"put one of {producers} before it"
            raise IkatError(f"stage {cls.name!r} needs {missing[0]!r}, which no earlier stage provides{hint}",
                            path=path, where=f"stages[{i}] ({cls.name})", fix=fix)
        if "candidates" in cls.provides:
            several = several or "candidates" in available or "queries" in available
            if several:
                available.discard("ranking")
        available.update(cls.provides)
        if not several:
            available.update(getattr(cls, "single_list_provides", ()))


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
            self.built[name] = self._build(name, dict(self.config.resources[name]))
        return self.built[name]

    def fits(self, param: str) -> list[str]:
        """Names of the declared resources that can serve a stage parameter."""
        return [n for n, spec in self.config.resources.items() if spec.get("kind") in PARAM_KINDS[param]]

    def default(self, param: str) -> str:
        """The only resource that fits a stage parameter the stage does not name."""
        names = self.fits(param)
        if len(names) != 1:
            raise IkatError(f"{len(names)} resources fit {param!r}; name the one the stage uses",
                            path=self.config.path, fix=f"add {param} = \"<resource name>\" to the stage")
        return names[0]

    def _build(self, name: str, spec: dict[str, Any]) -> Any:
        kind = spec.pop("kind", None)
        if kind == "llm":
            from ikatkit.llm import make_llm

            spec.setdefault("cache_dir", str(self.cache_dir / "llm"))
            return make_llm(spec)
        if kind in RANKER_KINDS:
            from ikatkit.rank import make_ranker

            if kind == "bi-encoder":
                spec.setdefault("cache_dir", str(self.cache_dir / "embeddings"))
            return make_ranker(kind, spec.pop("model"), **spec)
        if kind == "bm25":
            from ikatkit.retrieve.bm25 import Bm25Searcher

            if self.index is None:
                raise IkatError("this config retrieves but no index was given", fix="pass --index DIR")
            return Bm25Searcher(self.index, **spec)
        if kind == "dense":
            from ikatkit.retrieve.dense import DenseSearcher

            if "path" not in spec:
                raise IkatError(f"dense resource {name!r} names no index", path=self.config.path,
                                fix="add path = \"<folder of ikatkit index dense>\"")
            return DenseSearcher(spec.pop("path"), spec.pop("index", self.index), **spec)
        if kind == "partitioned-bm25":  # ``partitions`` = the folder of `ikatkit index partition`, else --index
            from ikatkit.partition.search import PartitionedSearcher

            folder = spec.pop("partitions", None) or self.index
            if folder is None:
                raise IkatError(f"resource {name!r} names no partitions folder", path=self.config.path,
                                fix="add partitions = \"DIR\" or pass --index DIR")
            return PartitionedSearcher(folder, **spec)
        raise IkatError(f"resource {name!r} has unknown kind {kind!r}", path=self.config.path,
                        fix="use kind = llm, bm25, dense, partitioned-bm25, bi-encoder or cross-encoder")

    @property
    def stats(self) -> dict[str, Any]:
        """Cache and usage statistics of the resources that were built."""
        return {name: dict(getattr(obj, "stats", {}) or {}) for name, obj in self.built.items()
                if getattr(obj, "stats", None) is not None}


def build_stages(config: RunConfig, resources: Resources) -> list[Stage]:
    """Instantiate the config's stages, resolving resource names to built objects; each stage that has a
    ``resource_names`` attribute gets ``{parameter: resource name}``."""
    stages: list[Stage] = []
    for i, spec in enumerate(config.stages):
        params = {k: v for k, v in spec.items() if k != "stage"}
        cls = STAGES[spec["stage"]]
        accepted = inspect.signature(cls.__init__).parameters
        names: dict[str, str] = {}
        for param in RESOURCE_PARAMS:
            if param in accepted and param not in params:
                required = accepted[param].default is inspect.Parameter.empty
                if required or resources.fits(param):
                    params[param] = resources.default(param)
            if param in params:
                names[param] = params[param]
                params[param] = resources.get(params[param])
        try:
            stage = cls(**params)
        except IkatError as err:
            if err.path is not None:
                raise
            raise IkatError(err.message, path=config.path, where=f"stages[{i}] ({spec['stage']})", fix=err.fix) from None
        if hasattr(stage, "resource_names"):
            stage.resource_names = names
        stages.append(stage)
    return stages
