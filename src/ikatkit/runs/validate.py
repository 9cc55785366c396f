"""Validate a run against the year's topics: the organizers' rules and the ones they miss.

Errors make a run unacceptable (the organizers' validators reject it or scoring breaks); warnings are
what the organizers fix or tolerate (no passage marked used: the top 5 count; responses over 250 words
are trimmed; an empty PTKB provenance). Problems are grouped by kind with the turns they occur in.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.runs.model import RUN_TYPES, Run, TurnResult
from ikatkit.topics import Topics

PASSAGE_ID = re.compile(r"^clueweb22-en\d{4}-\d{2}-\d{5}:\d+$")
MAX_PASSAGES = 1000
MAX_WORDS = 250
SHOWN_TURNS = 8


@dataclass
class ValidationReport:
    """Problems grouped as ``{message: [turn ids]}``; ``ok`` when there is no error."""

    run_name: str
    turns: int
    errors: dict[str, list[str]] = field(default_factory=dict)
    warnings: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, message: str, turn: str = "") -> None:
        self.errors.setdefault(message, []).append(turn)

    def warn(self, message: str, turn: str = "") -> None:
        self.warnings.setdefault(message, []).append(turn)

    def __str__(self) -> str:
        lines = []
        for label, problems in (("ERROR", self.errors), ("WARNING", self.warnings)):
            for message, turns in problems.items():
                named = [t for t in turns if t]
                where = f" — {len(named)} turns: {', '.join(named[:SHOWN_TURNS])}" if named else ""
                more = f" (+{len(named) - SHOWN_TURNS} more)" if len(named) > SHOWN_TURNS else ""
                lines.append(f"{label}: {message}{where}{more}")
        verdict = "valid" if self.ok else "INVALID"
        lines.append(f"{verdict}: run {self.run_name!r}, {self.turns} turns, {sum(map(len, self.errors.values()))} "
                     f"errors in {len(self.errors)} kinds, {sum(map(len, self.warnings.values()))} warnings")
        return "\n".join(lines)


def _check_turn(result: TurnResult, topics: Topics, run: Run, report: ValidationReport, ids: set[str]) -> None:
    qid = result.turn_id
    conversation = topics.conversation_of(qid)
    if not result.responses:
        report.error("turn has no response", qid)
        return
    ranks = [r.rank for r in result.responses]
    if any(rank <= 0 for rank in ranks):
        report.error("response rank must be > 0", qid)
    if any(b <= a for a, b in zip(ranks, ranks[1:])):
        report.error("response ranks must strictly increase", qid)
    for response in result.responses:
        if not response.text.strip() and run.run_type != "only_response":
            report.error("empty response text", qid)
        if len(response.text.split()) > MAX_WORDS:
            report.warn(f"response over {MAX_WORDS} words (the organizers trim it)", qid)
        passages = response.passages
        if run.run_type != "only_response" and not 1 <= len(passages) <= MAX_PASSAGES:
            report.error(f"a response needs 1 to {MAX_PASSAGES} passages", qid)
        scores = [p.score for p in passages]
        if any(not math.isfinite(s) for s in scores):
            report.error("passage score is NaN or infinite", qid)
        elif any(b > a for a, b in zip(scores, scores[1:])):
            report.error("passage scores must not increase within a response", qid)
        pids = [p.id for p in passages]
        if len(set(pids)) != len(pids):
            report.error("duplicate passage id within a response", qid)
        if passages and not any(p.used for p in passages):
            report.warn("no passage marked used (the organizers take the top 5)", qid)
        if any(not PASSAGE_ID.match(pid) for pid in pids):
            report.error("passage id is not of the form clueweb22-enXXXX-XX-XXXXX:N", qid)
        ids.update(pids)
        if not response.ptkb:
            report.warn("empty PTKB provenance", qid)
        for ref in response.ptkb:
            if not math.isfinite(ref.score):
                report.error("PTKB score is NaN or infinite", qid)
            if ref.key == "0":
                report.error("PTKB key 0 (keys start at 1)", qid)
            elif ref.key not in conversation.ptkb:
                report.error("PTKB key not in the conversation's PTKB", qid)
            elif run.year == 2023 and ref.text and ref.text != conversation.ptkb[ref.key]:
                report.error("PTKB statement text differs from the topics'", qid)


def validate_run(run: Run | str | Path, topics: Topics, *, ids: object | None = None) -> ValidationReport:
    """Check ``run`` against ``topics``; ``ids`` (an id file, hash file, Lucene index or id set) enables the
    check that every passage exists in the collection."""
    if not isinstance(run, Run):
        from ikatkit.runs.io import read_run

        try:
            run = read_run(run, topics=topics)
        except IkatError as err:
            report = ValidationReport(str(run), 0)
            report.error(str(err))
            return report
    report = ValidationReport(run.run_name, len(run.turns))
    if not run.run_name.strip():
        report.error("run_name is empty")
    if run.run_type not in RUN_TYPES:
        report.error(f"run_type {run.run_type!r} is not one of {RUN_TYPES}")
    if not run.turns:
        report.error("the run has no turns")
    seen: set[str] = set()
    known = set(topics.qids)
    passage_ids: set[str] = set()
    for result in run.turns:
        if result.turn_id in seen:
            report.error("turn appears twice", result.turn_id)
            continue
        seen.add(result.turn_id)
        if result.turn_id not in known:
            report.error("turn id not in the topics", result.turn_id)
            continue
        _check_turn(result, topics, run, report, passage_ids)
    for qid in topics.qids:
        if qid not in seen:
            report.error("turn of the topics missing from the run", qid)
    if ids is not None and passage_ids:
        from ikatkit.runs.passage_ids import passage_ids as id_source

        missing = id_source(ids).missing(passage_ids)
        for result in run.turns:
            if any(p.id in missing for r in result.responses for p in r.passages):
                report.error("passage id not in the collection", result.turn_id)
    return report
