"""The per-turn record store of a run folder: finished turns kept as JSON files, tied to the run's fingerprint.

A file (a *unit*) holds the turns computed together: a batch of ``run`` (``checkpoints/batch-00000.json``: the
batch is the unit that resumes, so a resumed run redoes whole batches with the same composition) or one
interactive turn (``turns/<user>/<topic>_<n>.json``, keyed by (user, topic, turn): several users may play one
topic). ``fingerprint.json`` beside them says what inputs they were computed from; files of another fingerprint,
or without one, are never reused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_json
from ikatkit.errors import IkatError
from ikatkit.pipelines.fingerprint import fingerprint

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe_name(text: str) -> str:
    """``text`` as one file name on any system: letters, digits, ``_`` and ``-`` kept, every other byte ``%XX``
    (so ``..``, ``/`` or an empty id cannot leave the folder, and two ids never share a name)."""
    if not text:
        return "%"
    return _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), text)


def turn_unit(user: str, topic: str, turn: int) -> str:
    """The unit of an interactive turn: ``<user>/<topic>_<turn>`` (safe names)."""
    return f"{safe_name(user)}/{safe_name(topic)}_{turn}"


def batch_unit(batch: int) -> str:
    return f"batch-{batch:05d}"


PLURAL_PARTS = ("topics", "prompts", "threads", "classifier files")  # fingerprint parts named by a plural noun


def _other(part: str) -> str:
    """A changed fingerprint part as the refusal names it: 'another config', 'other topics'."""
    return f"{'other' if part.startswith(PLURAL_PARTS) else 'another'} {part}"


class TurnStore:
    """Units of finished turns under ``folder``; ``what`` names them in errors (``checkpoints``, ``turns``);
    ``fresh`` is the fix of a refused folder, in the options of the command that runs (its driver's)."""

    def __init__(self, folder: Path, what: str, fresh: str = "use a new --out") -> None:
        self.dir, self.what, self.fresh = folder, what, fresh
        self.stamp = folder / "fingerprint.json"

    def check(self, parts: dict[str, str]) -> None:
        """Refuse units of other inputs (naming what changed) and units without a fingerprint."""
        if self.stamp.exists():
            kept = json.loads(self.stamp.read_text(encoding="utf-8"))["parts"]
            changed = [key for key, value in parts.items() if kept.get(key) != value]
            if changed:
                raise IkatError(f"the output folder holds {self.what} of " + ", ".join(map(_other, changed)),
                                path=self.dir, fix=self.fresh)
        elif any(self.units()):
            raise IkatError(f"the output folder holds {self.what} without a fingerprint (an older ikatkit, or "
                            "files copied in): they cannot be checked, so they are not reused",
                            path=self.dir, fix=self.fresh)

    def write_stamp(self, parts: dict[str, str]) -> None:
        """Record the fingerprint (once, atomically) before the first unit is saved."""
        if not self.stamp.exists():
            write_json(self.stamp, {"fingerprint": fingerprint(parts), "parts": parts})

    def units(self) -> list[Path]:
        return sorted(p for p in self.dir.rglob("*.json") if p != self.stamp) if self.dir.exists() else []

    def clear(self) -> None:
        """Discard every unit and the fingerprint (``--restart``)."""
        for path in [*self.units(), self.stamp]:
            path.unlink(missing_ok=True)

    def path(self, unit: str) -> Path:
        return self.dir / f"{unit}.json"

    def done(self, unit: str) -> bool:
        return self.path(unit).exists()

    def save(self, unit: str, data: dict[str, Any]) -> None:
        path = self.path(unit)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, data, indent=None)

    def load(self, unit: str) -> dict[str, Any] | None:
        path = self.path(unit)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
