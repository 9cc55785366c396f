"""Rubric measures judged by an LLM: each rubric question of a dialogue's topic scored 0-5 on its responses."""

from __future__ import annotations

from ikatkit.evaluate.responses.measures import ResponseMeasure
from ikatkit.evaluate.responses.providers.base import Context, Provider, Scored, register
from ikatkit.evaluate.responses.rubrics import rubric_scores, topic_of


@register
class Rubrics(Provider):
    needs = "rubrics"
    evidence = "rubrics"
    fix = "pass --rubrics (rubrics.json or rubrics.csv)"

    def score(self, measures: list[ResponseMeasure], ctx: Context) -> Scored:
        assert ctx.rubrics is not None
        judge = ctx.scorers.rubric_judge()
        by_topic = rubric_scores({q: ctx.responses[q] for q in ctx.turns}, ctx.rubrics, judge)
        ctx.info["rubric_judge"] = judge.label
        ctx.info["rubric_scores"] = {topic: row["scores"] for topic, row in by_topic.items()}
        ctx.info["topics_without_rubrics"] = sorted({topic_of(q) for q in ctx.turns}
                                                    - {topic_of(d) for d in by_topic})
        rows = list(by_topic)
        return Scored(rows, {m.key: [by_topic[t][m.key] for t in rows] for m in measures})
