"""Content-addressed cache of LLM outputs: one JSON file per key, written atomically (safe under kill
and concurrent writers: the last complete write wins and a reader never sees half a file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_json
from ikatkit.digest import json_digest


def cache_key(**parts: Any) -> str:
    """sha256 of the canonical JSON of everything that determines an output."""
    return json_digest(parts)


class DiskCache:
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        write_json(self._path(key), value, indent=None)
