"""What an interactive run keeps under ``--out`` to resume: ``state.json``; the turns are the session's record
store (``turns/<user>/<topic>_<n>.json``, :mod:`ikatkit.pipelines.session.store`).

``state.json`` names the run (id, API, debug or not, the edition's rules in force), whether ``/run/start`` was sent
and answered, the message being answered (written before each request), and the order of the turns as the server
got them, each as ``[user, topic, n]``: one topic may be played by several users. A turn file holds the turn's
record (as ``run`` checkpoints keep them), what was sent and the seconds per stage; a farewell (the user's last
message of a session) is kept the same way, without a response.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_json
from ikatkit.errors import IkatError

FIX = "rerun with the run's own options, or use a new --out"


@dataclass
class RunState:
    run_id: str
    api: str
    debug: bool
    rules: int | None = None  # the edition whose rules the run follows (2025, 2026), once the first message came
    team_id: str = ""
    start_sent: bool = False
    started: bool = False
    complete: bool = False
    message: dict[str, Any] | None = None  # the user message being answered
    turns: list[list[Any]] = field(default_factory=list)  # [user, topic, n] in the order the server got them

    @classmethod
    def load(cls, out: Path) -> RunState | None:
        path = out / "state.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        if "fingerprint" in data or any(not isinstance(t, list) for t in data.get("turns", [])):
            raise IkatError("this folder holds a run of an older ikatkit (turns kept by topic only)", path=path,
                            fix="finish it with that ikatkit, or start the run anew in a new --out")
        return cls(**data)

    def save(self, out: Path) -> None:
        write_json(out / "state.json", asdict(self))

    def check(self, run_id: str, api: str, debug: bool, rules: int | None, out: Path) -> None:
        """Refuse to continue another run, API, debug mode or rules from this folder."""
        for name, kept, given in (("--run-id", self.run_id, run_id), ("--api", self.api, api),
                                  ("--debug", self.debug, debug), ("--rules", self.rules, rules)):
            if kept != given and not (name == "--rules" and (given is None or kept is None)):
                raise IkatError(f"this folder holds run {self.run_id!r} of another {name} ({kept!r}, now {given!r})",
                                path=out / "state.json", fix=FIX)
