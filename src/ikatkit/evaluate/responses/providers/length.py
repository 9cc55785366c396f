"""Length measures: need nothing but the response."""

from __future__ import annotations

from ikatkit.evaluate.responses import scorers as sc
from ikatkit.evaluate.responses.measures import ResponseMeasure
from ikatkit.evaluate.responses.providers.base import Context, Provider, Scored, register


@register
class Length(Provider):
    needs = "none"

    def score(self, measures: list[ResponseMeasure], ctx: Context) -> Scored:
        texts = [ctx.responses[q] for q in ctx.turns]
        return Scored(list(ctx.turns), {"words": [float(len(t.split())) for t in texts],
                                        "sentences": [float(len(sc.sentences(t))) for t in texts],
                                        "empty": [float(not t.strip()) for t in texts]})
