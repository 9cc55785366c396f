"""Finished turn records into the run model: the one conversion ``run`` and ``interactive`` share."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ikatkit.pipelines.record import TurnRecord
from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult, strictly_decreasing
from ikatkit.runs.templates import load_template


def max_passages(fmt: int | str) -> int:
    """How many passages a turn of format ``fmt`` ranks: the template's limit on its ranking field."""
    template = load_template(fmt)
    return template.limit("max_items", str(template.rule("ranking")))


def to_run(records: Sequence[TurnRecord], name: str, run_type: str, year: int, team_id: str = "", *,
           limit: int | None = None, ptkb_keys: Mapping[str, Collection[str]] | None = None,
           users: Sequence[str | None] | None = None) -> Run:
    """The run model of finished records: one response per turn, the ranking's top ``limit`` passages (default:
    the year's template's limit) in rank order with strictly decreasing scores. With ``ptkb_keys`` (query id ->
    the keys of its topic's PTKB), only those keys are cited as PTKB provenance: statements ``track_persona``
    added (``u1`` ...) come from the user's words, not from the PTKB the format cites. ``users``: each record's
    simulated user (interactive runs where several users play a topic): the turn's key is then
    ``{user}/{topic}_{n}`` (:func:`~ikatkit.runs.model.user_turn_key`), in the TREC run too."""
    limit = max_passages(year) if limit is None else limit
    turns = []
    for i, record in enumerate(records):
        used = set(record.used)
        passages = [PassageRef(pid, score, record.passage_texts.get(pid, ""), pid in used)
                    for pid, score in strictly_decreasing(record.ranking[:limit])]
        citable = ptkb_keys[record.qid] if ptkb_keys is not None else record.ptkb_all
        ptkb = [PtkbRef(key, score, record.ptkb_all.get(key, "")) for key, score in record.ptkb if key in citable]
        turns.append(TurnResult(record.qid, [Response(1, record.response, passages, ptkb)],
                                user_id=users[i] if users is not None else None))
    return Run(name, run_type, turns, year, team_id)
