"""A run built from the real topics' ground truth, shared by the run-format and validator tests."""

from __future__ import annotations

import json
from pathlib import Path

from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult
from ikatkit.topics import Topics


def gold_run(topics: Topics, year: int = 2023) -> Run:
    """Canonical responses as text, response provenance as passages (top 3 used), gold PTKB provenance.

    Turns citing no passage get the first provenance passage of the topics, so every response has one.
    """
    fallback = next(pid for t in topics for pid in t.response_provenance)
    turns = []
    for turn in topics:
        ptkb = topics.conversation_of(turn.qid).ptkb
        cited = list(dict.fromkeys(turn.response_provenance)) or [fallback]
        passages = [PassageRef(pid, 10.0 - i, "", i < 3) for i, pid in enumerate(cited)]
        refs = [PtkbRef(k, 1.0 - 0.1 * i, ptkb[k]) for i, k in enumerate(turn.ptkb_provenance)]
        turns.append(TurnResult(turn.qid, [Response(1, turn.response or "No answer.", passages, refs)]))
    return Run("gold", "manual", turns, year, "uva")


def turns_in_file(topics_file: Path) -> list[tuple[str, list[str]]]:
    """(turn id, PTKB provenance keys as strings) per turn, read from the topics JSON itself, not via load_topics."""
    return [(f"{conversation['number']}_{turn['turn_id']}", [str(k) for k in turn.get("ptkb_provenance") or []])
            for conversation in json.loads(topics_file.read_text()) for turn in conversation["turns"]]
