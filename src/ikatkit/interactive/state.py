"""What an interactive run keeps under ``--out`` to resume: ``state.json`` and one file per turn.

``state.json`` names the run (id, API, config fingerprint), whether ``/run/start`` was sent and answered, the
message being answered and the answer about to be sent (written before each request), and the order of the turns.
``turns/<topic>_<n>.json`` is a turn's record (as ``run`` checkpoints keep them), what was sent and the seconds per
stage; a farewell (the user's last message of a session) is kept the same way, without a response.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_json
from ikatkit.errors import IkatError


@dataclass
class RunState:
    run_id: str
    api: str
    debug: bool
    fingerprint: str
    team_id: str = ""
    start_sent: bool = False
    started: bool = False
    complete: bool = False
    message: dict[str, Any] | None = None  # the user message being answered
    turns: list[str] = field(default_factory=list)  # turn files in the order the server got them

    @classmethod
    def load(cls, out: Path) -> RunState | None:
        path = out / "state.json"
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    def save(self, out: Path) -> None:
        write_json(out / "state.json", asdict(self))

    def check(self, run_id: str, api: str, debug: bool, fingerprint: str, out: Path) -> None:
        """Refuse to continue another run, API or config from this folder."""
        for name, kept, given in (("--run-id", self.run_id, run_id), ("--api", self.api, api), ("--debug", self.debug,
                                  debug), ("config fingerprint", self.fingerprint, fingerprint)):
            if kept != given:
                raise IkatError(f"this folder holds run {self.run_id!r} of another {name} ({kept!r}, now {given!r})",
                                path=out / "state.json", fix="rerun with the run's own options, or use a new --out")


def turn_path(out: Path, qid: str) -> Path:
    return out / "turns" / f"{qid}.json"


def load_turn(out: Path, qid: str) -> dict[str, Any] | None:
    path = turn_path(out, qid)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def save_turn(out: Path, qid: str, data: dict[str, Any]) -> None:
    write_json(turn_path(out, qid), data, indent=None)
