"""The ``manifest.json`` that ``ikatkit run`` and ``ikatkit interactive`` write beside a run file: read back where
it names that file (another folder's manifest, or a run copied away from its folder, gives nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def manifest_of(run_file: str | Path) -> dict[str, Any] | None:
    """The manifest beside ``run_file`` when it names it (as its run, TREC or dump file), else None."""
    path = Path(run_file)
    manifest_file = path.parent / "manifest.json"
    if not manifest_file.is_file():
        return None
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict):
        return None
    files = manifest.get("files") or {}
    dump = manifest.get("dump") or {}
    names = {files.get("run"), files.get("trec"), dump.get("file"), manifest.get("trec")}
    return manifest if path.name in names else None


def description_of(manifest: dict[str, Any]) -> str:
    """The run's description: the interactive run's, else its config's ``description``."""
    config = manifest.get("config") or {}
    return str(manifest.get("description") or (config.get("description") if isinstance(config, dict) else "") or "")
