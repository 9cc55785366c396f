"""The simulator's recorded judgements as measures, no LLM needed.

An interactive run as the organizers released it (and ikatkit's own ``simulate --users llm`` dump) records per
answered turn the rubric question the simulated user was pursuing (``user_rubrik``) and its 0-5 score of the
answer (``user_rubrik_score``). The unit is a (dialogue, rubric) pair: a dialogue is a conversation, or a user's
conversation where several users play one. One computation (:func:`sim_units`) serves the measures per dialogue
here and per user type (:func:`ikatkit.evaluate.user_types.sim_table`): a unit's score is the best score recorded
for it; it is covered when that score is above ``sim_threshold`` (3: the organizers' simulator moves on there).

- ``SimRubricScore``: mean of the units' scores;
- ``SimRubricCoverage``: share of the units covered;
- ``SimTurnsToCover``: mean over the covered units of the turns spent on each up to the one that covered it.

Which units a mean is over (``unreached``, ``--unreached``): ``skip`` (default), the units the user pursued on a
judged turn; ``zero``, every rubric of the conversation, those never pursued scoring 0. ``SimTurnsToCover`` is over
covered units either way. A run's value is the mean over its dialogues. Recorded rubric texts are matched to the
file's questions with white space collapsed and case ignored; those that match none are counted and reported, never
dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ikatkit.evaluate.responses.measures import ResponseMeasure
from ikatkit.evaluate.responses.providers.base import Context, Provider, Scored, register
from ikatkit.evaluate.responses.rubrics import Rubric, dialogue_of, norm, rubric_ids, topic_of

Judged = tuple[str | None, int | None]
Unit = tuple[str, str]  # (dialogue, rubric id rub_<conversation>_<n>)
UNREACHED = ("skip", "zero")
UNREACHED_SAID = {"skip": "Sim means over the rubrics each dialogue's user pursued (--unreached skip)",
                  "zero": "Sim means over every rubric of each dialogue's conversation, 0 where never pursued "
                          "(--unreached zero)"}


def _turn_number(turn: str) -> int:
    tail = turn.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


@dataclass
class SimUnits:
    """Per judged (dialogue, rubric): ``SimRubricScore`` (best 0-5 score), ``SimRubricCoverage`` (1.0 above the
    threshold, else 0.0) and, for covered units, ``SimTurnsToCover``; ``reached``: every unit a turn pursued, judged
    or not (a replay user judges nothing); ``unmatched``: recorded rubrics no question of their conversation
    matches (``turn: text``)."""

    values: dict[Unit, dict[str, float]] = field(default_factory=dict)
    reached: set[Unit] = field(default_factory=set)
    unmatched: list[str] = field(default_factory=list)


def sim_units(judged: Mapping[str, Judged], rubrics: Mapping[str, list[Rubric]], threshold: int = 3) -> SimUnits:
    """The simulator's judgements per (dialogue, rubric) unit; turns of conversations without rubrics are left
    out (the provider names them)."""
    ids = rubric_ids(rubrics)
    out = SimUnits()
    spent: dict[Unit, int] = {}
    for turn in sorted(judged, key=lambda k: (dialogue_of(k), _turn_number(k))):
        rubric, score = judged[turn]
        if rubric is None or topic_of(turn) not in ids:
            continue
        rid = ids[topic_of(turn)].get(norm(rubric))
        if rid is None:
            out.unmatched.append(f"{turn}: {rubric[:60]}")
            continue
        unit = (dialogue_of(turn), rid)
        out.reached.add(unit)
        if score is None:
            continue
        spent[unit] = spent.get(unit, 0) + 1
        values = out.values.setdefault(unit, {"SimRubricScore": 0.0, "SimRubricCoverage": 0.0})
        values["SimRubricScore"] = max(values["SimRubricScore"], float(score))
        if score > threshold and "SimTurnsToCover" not in values:
            values["SimRubricCoverage"] = 1.0
            values["SimTurnsToCover"] = float(spent[unit])
    return out


def unit_mean(column: list[float], units: int, unreached: str) -> float | None:
    """The mean of a measure's values over the units reached (``skip``), or over ``units`` units with 0 for
    those not in ``column`` (``zero``); None without a value."""
    denominator = units if unreached == "zero" else len(column)
    return sum(column) / denominator if column and denominator else None


def sim_rubric_scores(judged: Mapping[str, Judged], rubrics: Mapping[str, list[Rubric]], threshold: int = 3,
                      unreached: str = "zero") -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per dialogue with rubrics, from :func:`sim_units`: ``scores`` (best recorded 0-5 score per rubric id,
    0 if never judged), ``score`` and ``coverage`` (means by ``unreached``: over the dialogue's judged units, or
    over all its conversation's rubrics), ``turns`` (mean turns per covered rubric, None if none is covered);
    and the unmatched recorded rubrics."""
    units = sim_units(judged, rubrics, threshold)
    ids = rubric_ids(rubrics)
    dialogues = dict.fromkeys(dialogue_of(t) for t in judged if topic_of(t) in ids)
    out: dict[str, dict[str, Any]] = {}
    for dialogue in dialogues:
        mine = {rid: v for (d, rid), v in units.values.items() if d == dialogue}
        everyone = len(ids[topic_of(dialogue)])
        covered = [v["SimTurnsToCover"] for v in mine.values() if "SimTurnsToCover" in v]
        out[dialogue] = {
            "scores": {rid: mine[rid]["SimRubricScore"] if rid in mine else 0.0
                       for rid in ids[topic_of(dialogue)].values()},
            "score": unit_mean([v["SimRubricScore"] for v in mine.values()], everyone, unreached),
            "coverage": unit_mean([v["SimRubricCoverage"] for v in mine.values()], everyone, unreached),
            "turns": sum(covered) / len(covered) if covered else None}
    return out, units.unmatched


@register
class Simulator(Provider):
    needs = "simulator"
    evidence = "rubrics"
    fix = "pass --rubrics (rubrics.json or rubrics.csv) and a run that records user_rubrik/user_rubrik_score"

    def score(self, measures: list[ResponseMeasure], ctx: Context) -> Scored:
        assert ctx.rubrics is not None
        judged = {q: ctx.run.judged[q] for q in ctx.turns if q in ctx.run.judged}
        if not any(score is not None for _, score in judged.values()):
            ctx.warnings.append(f"run {ctx.run.name} records no simulator judgements (user_rubrik_score): "
                                "no Sim measures")
            return Scored([], {})
        threshold, unreached = ctx.scorers.sim_threshold, ctx.scorers.unreached
        by_topic, unmatched = sim_rubric_scores(judged, ctx.rubrics, threshold, unreached)
        if unmatched:
            ctx.warnings.append(f"{len(unmatched)} recorded rubrics of run {ctx.run.name} match no question of the "
                                f"rubric file, not scored (e.g. {'; '.join(unmatched[:2])})")
        without = sorted({topic_of(q) for q in judged} - {topic_of(d) for d in by_topic})
        if without:
            ctx.warnings.append(f"{len(without)} conversations of run {ctx.run.name} have no rubrics: "
                                f"{', '.join(without[:5])}")
        ctx.info["sim_rubric_scores"] = {topic: row["scores"] for topic, row in by_topic.items()}
        ctx.info["sim_threshold"] = f"covered: score > {threshold} (the organizers' simulator)"
        ctx.info["sim_unreached"] = UNREACHED_SAID[unreached]
        rows = list(by_topic)
        return Scored(rows, {m.key: [by_topic[t][m.key] for t in rows] for m in measures})
