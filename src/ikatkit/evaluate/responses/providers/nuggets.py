"""Nugget recall: the turn's gold nuggets matched in the response (embedding or LLM matcher), AutoNuggetizer's
scores."""

from __future__ import annotations

from ikatkit.evaluate.responses.measures import ResponseMeasure
from ikatkit.evaluate.responses.nuggets import nugget_scores
from ikatkit.evaluate.responses.providers.base import Context, Provider, Scored, register


@register
class Nuggets(Provider):
    needs = "nuggets"
    evidence = "nuggets"
    fix = "pass --nuggets"
    topic_turns = True

    def score(self, measures: list[ResponseMeasure], ctx: Context) -> Scored:
        assert ctx.nuggets is not None
        nuggets = ctx.nuggets
        rows = [q for q in ctx.turns if nuggets.get(q)]
        ctx.info["turns_without_nuggets"] = [q for q in ctx.turns if not nuggets.get(q)]
        matcher = ctx.scorers.nugget_matcher()
        ctx.info["nugget_matcher"] = matcher.label
        topics = ctx.topics
        queries = [topics.turn(q).resolved_utterance or topics.turn(q).utterance for q in rows] if topics else None
        support = matcher.support([ctx.responses[q] for q in rows], [nuggets[q] for q in rows], queries)
        scores = [nugget_scores(nuggets[q], s, ctx.vital_grade) for q, s in zip(rows, support)]
        return Scored(rows, {m.key: [row.get(m.key) for row in scores] for m in measures})
