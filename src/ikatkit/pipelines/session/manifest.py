"""The run folder's ``manifest.json``: one schema for ``run`` and ``interactive``, and one reader of both.

Every manifest has the common part (:data:`COMMON`): what ran (``kind``, ``run_name``, config, index, topics,
``fingerprint``), what came out (``turns``, ``turns_without_passages``, ``files``, ``valid``), what it took
(``seconds_per_stage``, ``seconds_per_turn``: the mean over every turn, ``turns_run_now``, ``seconds_run_now``),
what happened (``notes``, ``guarded_llm_outputs``, ``resource_stats``, each stage's summary under its
``summary_key``) and the ``versions``; then the kind's own keys (``run``: year, batches, the index manifest;
``interactive``: the API, the dump, sessions, percentiles and HTTP times).
"""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from ikatkit.runs.manifest import RunManifest, read_manifest

__all__ = ["RunManifest", "read_manifest"]  # the reader lives with the run files (ikatkit.runs.manifest)

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
