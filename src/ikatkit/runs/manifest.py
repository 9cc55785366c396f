"""The ``manifest.json`` that ``ikatkit run`` and ``ikatkit interactive`` write beside a run file (one schema,
:mod:`ikatkit.pipelines.session.manifest`): one reader of both (:func:`read_manifest`), and the manifest beside a
run file where it names that file (another folder's manifest, or a run copied away from its folder, gives
nothing)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError


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


def _lenient(folder: Path) -> dict[str, Any] | None:
    """The manifest in ``folder``, read leniently (a manifest of an older ikatkit still names its files and
    description), or None."""
    manifest_file = folder / "manifest.json"
    if not manifest_file.is_file():
        return None
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def run_files(folder: str | Path) -> list[Path]:
    """The run files a run folder's manifest names (its run or dump, then its TREC run) that are there."""
    manifest = _lenient(Path(folder)) or {}
    files = manifest.get("files")
    names = [files.get("run"), files.get("trec")] if isinstance(files, dict) else []
    return [Path(folder) / n for n in names if isinstance(n, str) and (Path(folder) / n).is_file()]


def manifest_of(run_file: str | Path) -> dict[str, Any] | None:
    """The manifest beside ``run_file`` when it names it (as its run, TREC or dump file), else None."""
    path = Path(run_file)
    manifest = _lenient(path.parent)
    if manifest is None:
        return None
    files = manifest.get("files") or {}
    dump = manifest.get("dump") or {}
    names = {files.get("run"), files.get("trec"), dump.get("file"), manifest.get("trec")}
    return manifest if path.name in names else None


def description_of(manifest: dict[str, Any]) -> str:
    """The run's description: the interactive run's, else its config's ``description``."""
    config = manifest.get("config") or {}
    return str(manifest.get("description") or (config.get("description") if isinstance(config, dict) else "") or "")
