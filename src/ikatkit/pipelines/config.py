"""Run configs: a TOML file naming resources (LLMs, rankers, BM25) and the list of stages over them."""

from __future__ import annotations

import inspect
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.pipelines.stages import STAGES, Stage

RANKER_KINDS = ("bi-encoder", "cross-encoder")
PARAM_KINDS = {"llm": ("llm",), "ranker": RANKER_KINDS, "searcher": ("bm25", "partitioned-bm25")}
RESOURCE_PARAMS = tuple(PARAM_KINDS)


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


def load_config(path: str | Path) -> RunConfig:
    """Read and check a run config."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("config not found", path=path, fix="pass one of the files in configs/")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise IkatError(f"invalid TOML: {err}", path=path, fix="check the config's syntax") from None
    for key in ("name", "stages"):
        if key not in raw:
            raise IkatError(f"missing {key!r}", path=path, fix="see configs/demo.toml for the shape of a config")
    resources = raw.get("resources", {})
    for i, stage in enumerate(raw["stages"]):
        if stage.get("stage") not in STAGES:
            raise IkatError(f"unknown stage {stage.get('stage')!r}", path=path, where=f"stages[{i}]",
                            fix=f"use one of {sorted(STAGES)}")
        for param in RESOURCE_PARAMS:
            if param in stage and stage[param] not in resources:
                raise IkatError(f"{param} {stage[param]!r} is not a declared resource", path=path,
                                where=f"stages[{i}]", fix=f"declare [resources.{stage[param]}]")
    return RunConfig(raw["name"], raw.get("run_type", "automatic"), resources, raw["stages"],
                     int(raw.get("batch_size", 16)), raw.get("team_id", ""), raw.get("description", ""), path, raw)


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

            return make_ranker(kind, spec.pop("model"), **spec)
        if kind == "bm25":
            from ikatkit.retrieve.bm25 import Bm25Searcher

            if self.index is None:
                raise IkatError("this config retrieves but no index was given", fix="pass --index DIR")
            return Bm25Searcher(self.index, **spec)
        if kind == "partitioned-bm25":  # ``partitions`` = the folder of `ikatkit index partition`, else --index
            from ikatkit.partition.search import PartitionedSearcher

            folder = spec.pop("partitions", None) or self.index
            if folder is None:
                raise IkatError(f"resource {name!r} names no partitions folder", path=self.config.path,
                                fix="add partitions = \"DIR\" or pass --index DIR")
            return PartitionedSearcher(folder, **spec)
        raise IkatError(f"resource {name!r} has unknown kind {kind!r}", path=self.config.path,
                        fix="use kind = llm, bm25, partitioned-bm25, bi-encoder or cross-encoder")

    @property
    def stats(self) -> dict[str, Any]:
        """Cache and usage statistics of the resources that were built."""
        return {name: dict(getattr(obj, "stats", {}) or {}) for name, obj in self.built.items()
                if getattr(obj, "stats", None) is not None}


def build_stages(config: RunConfig, resources: Resources) -> list[Stage]:
    """Instantiate the config's stages, resolving resource names to built objects."""
    stages: list[Stage] = []
    for spec in config.stages:
        params = {k: v for k, v in spec.items() if k != "stage"}
        cls = STAGES[spec["stage"]]
        accepted = inspect.signature(cls.__init__).parameters
        for param in RESOURCE_PARAMS:
            if param in accepted and param not in params:
                required = accepted[param].default is inspect.Parameter.empty
                if required or resources.fits(param):
                    params[param] = resources.default(param)
            if param in params:
                params[param] = resources.get(params[param])
        stages.append(cls(**params))
    return stages
