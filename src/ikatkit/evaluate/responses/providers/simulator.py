"""The simulator's recorded judgements as measures, no LLM needed.

An interactive run as the organizers released it (and ikatkit's own ``simulate --users llm`` dump) records per
answered turn the rubric question the simulated user was pursuing (``user_rubrik``) and its 0-5 score of the
answer (``user_rubrik_score``). Per conversation, a rubric's score is the best score recorded for it (0 if never
pursued); the organizers' simulator counts a rubric covered when its score is above 3 (``sim_threshold``):

- ``SimRubricScore``: mean over the conversation's rubrics (the ``--rubrics`` file) of their scores;
- ``SimRubricCoverage``: share of them covered;
- ``SimTurnsToCover``: mean over the covered rubrics of the turns spent on each up to the one that covered it.

A run's value is the mean over its conversations. Recorded rubric texts are matched to the file's questions with
white space collapsed and case ignored; those that match none are counted and reported, never dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ikatkit.evaluate.responses.measures import ResponseMeasure
from ikatkit.evaluate.responses.providers.base import Context, Provider, Scored, register
from ikatkit.evaluate.responses.rubrics import Rubric, dialogue_of, norm, topic_of

Judged = tuple[str | None, int | None]


def _turn_number(turn: str) -> int:
    tail = turn.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def sim_rubric_scores(judged: Mapping[str, Judged], rubrics: Mapping[str, list[Rubric]],
                      threshold: int = 3) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per dialogue (a conversation, or a user's conversation where several users play one) with rubrics:
    ``scores`` (best recorded 0-5 score per rubric id, 0 if never pursued),
    ``score`` (mean), ``coverage`` (share above ``threshold``), ``turns`` (mean turns per covered rubric, None if
    none is covered); and the recorded rubrics that match no question of their conversation (``turn: text``)."""
    by_dialogue: dict[str, list[str]] = {}
    for turn in judged:
        by_dialogue.setdefault(dialogue_of(turn), []).append(turn)
    out: dict[str, dict[str, Any]] = {}
    unmatched: list[str] = []
    for dialogue, turns in by_dialogue.items():
        topic = topic_of(dialogue)
        if topic not in rubrics:
            continue
        ids = {norm(r.question): r.id for r in rubrics[topic]}
        best = {r.id: 0 for r in rubrics[topic]}
        spent: Counter[str] = Counter()
        to_cover: dict[str, int] = {}
        for turn in sorted(turns, key=_turn_number):
            rubric, score = judged[turn]
            if rubric is None or score is None:
                continue
            rid = ids.get(norm(rubric))
            if rid is None:
                unmatched.append(f"{turn}: {rubric[:60]}")
                continue
            spent[rid] += 1
            best[rid] = max(best[rid], score)
            if score > threshold and rid not in to_cover:
                to_cover[rid] = spent[rid]
        out[dialogue] = {"scores": best, "score": sum(best.values()) / len(best),
                      "coverage": sum(v > threshold for v in best.values()) / len(best),
                      "turns": sum(to_cover.values()) / len(to_cover) if to_cover else None}
    return out, unmatched


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
        threshold = ctx.scorers.sim_threshold
        by_topic, unmatched = sim_rubric_scores(judged, ctx.rubrics, threshold)
        if unmatched:
            ctx.warnings.append(f"{len(unmatched)} recorded rubrics of run {ctx.run.name} match no question of the "
                                f"rubric file, not scored (e.g. {'; '.join(unmatched[:2])})")
        without = sorted({topic_of(q) for q in judged} - {topic_of(d) for d in by_topic})
        if without:
            ctx.warnings.append(f"{len(without)} conversations of run {ctx.run.name} have no rubrics: "
                                f"{', '.join(without[:5])}")
        ctx.info["sim_rubric_scores"] = {topic: row["scores"] for topic, row in by_topic.items()}
        ctx.info["sim_threshold"] = f"covered: score > {threshold} (the organizers' simulator)"
        rows = list(by_topic)
        return Scored(rows, {m.key: [by_topic[t][m.key] for t in rows] for m in measures})
