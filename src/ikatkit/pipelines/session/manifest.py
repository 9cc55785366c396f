"""The run folder's ``manifest.json``: one schema for ``run`` and ``interactive``, and one reader of both.

Every manifest has the common part (:data:`COMMON`): what ran (``kind``, ``run_name``, config, index, topics,
``fingerprint``), what came out (``turns``, ``turns_without_passages``, ``files``, ``valid``), what it took
(``seconds_per_stage``, ``seconds_per_turn``: the mean over every turn, ``turns_run_now``, ``seconds_run_now``),
what happened (``notes``, ``guarded_llm_outputs``, ``resource_stats``, each stage's summary under its
``summary_key``) and the ``versions``; then the kind's own keys (``run``: year, batches, the index manifest;
``interactive``: the API, the dump, sessions, percentiles and HTTP times).
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError

VERSIONED = ("ikatkit", "pyserini", "torch", "transformers", "sentence-transformers", "ir-measures", "openai")
COMMON = ("kind", "run_name", "turns", "turns_without_passages", "config", "config_file", "topics", "index",
          "fingerprint", "files", "seconds_per_stage", "seconds_per_turn", "turns_run_now", "seconds_run_now",
          "resource_stats", "notes", "guarded_llm_outputs", "valid", "versions", "python")
NO_PASSAGES = "no passage retrieved: answered without citations"


def package_versions() -> dict[str, str]:
    """The installed versions of the packages that change outputs (for manifests)."""
    found = {}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


@dataclass
class RunManifest:
    """A manifest as one reader sees it, whichever command wrote it: the common keys, the rest in ``details``."""

    kind: str
    run_name: str
    turns: int
    turns_without_passages: int
    files: dict[str, str]
    seconds_per_stage: dict[str, float]
    seconds_per_turn: float
    notes: dict[str, int]
    valid: bool | None
    versions: dict[str, str]
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.details))


def read_manifest(path: str | Path) -> RunManifest:
    """The manifest at ``path`` (a file or a run folder) of a ``run`` or an ``interactive`` run."""
    path = Path(path)
    path = path / "manifest.json" if path.is_dir() else path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return RunManifest(data["kind"], data["run_name"], int(data["turns"]), int(data["turns_without_passages"]),
                           dict(data["files"]), dict(data["seconds_per_stage"]), float(data["seconds_per_turn"]),
                           dict(data["notes"]), data["valid"], dict(data["versions"]), data)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise IkatError(f"not a run manifest ({type(err).__name__}: {err})", path=path,
                        fix="point at the manifest.json that `ikatkit run` or `ikatkit interactive` wrote "
                            "(a manifest of an older ikatkit: rerun the command to rewrite it)") from None


def common_part(*, kind: str, run_name: str, records: list[Any], config: Any, topics: str | None,
                index: str | Path | None, fingerprint: str, files: dict[str, str], seconds: dict[str, float],
                turns_now: int, seconds_now: float, resource_stats: dict[str, Any], valid: bool | None,
                summaries: dict[str, Any]) -> dict[str, Any]:
    """The common keys of a manifest from the run's finished ``records`` (TurnRecords) and stage ``seconds``.
    Turns that retrieved nothing are counted (``turns_without_passages``) and noted (:data:`NO_PASSAGES`)."""
    from ikatkit.pipelines.pipeline import tally

    notes, guarded = tally(records)
    empty = sum(not record.ranking for record in records)
    if empty:
        notes = {**notes, NO_PASSAGES: empty}
    return {
        "kind": kind, "run_name": run_name, "turns": len(records), "turns_without_passages": empty,
        "config": config.raw, "config_file": str(config.path) if config.path else None, "topics": topics,
        "index": str(index) if index else None, "fingerprint": fingerprint, "files": files,
        "seconds_per_stage": {k: round(v, 3) for k, v in seconds.items()},
        "seconds_per_turn": round(sum(seconds.values()) / max(len(records), 1), 4),
        "turns_run_now": turns_now, "seconds_run_now": round(seconds_now, 3), "resource_stats": resource_stats,
        "notes": notes, "guarded_llm_outputs": guarded, "valid": valid, **summaries,
        "versions": package_versions(), "python": platform.python_version(),
    }


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50, p95 and mean of ``values`` (None each when there are none)."""
    import numpy as np

    if not values:
        return {"p50": None, "p95": None, "mean": None}
    return {"p50": round(float(np.percentile(values, 50)), 4), "p95": round(float(np.percentile(values, 95)), 4),
            "mean": round(float(np.mean(values)), 4)}
