"""Grounding measures against the texts of the passages a response marks as used."""

from __future__ import annotations

from ikatkit.evaluate.responses import scorers as sc
from ikatkit.evaluate.responses.measures import ResponseMeasure
from ikatkit.evaluate.responses.providers.base import Context, Provider, Scored, register


@register
class Passages(Provider):
    needs = "passages"
    evidence = "passages"
    fix = "pass --passages JSONL or --index"

    def score(self, measures: list[ResponseMeasure], ctx: Context) -> Scored:
        assert ctx.passages is not None
        found: dict[str, list[str]] = {}
        for q in ctx.turns:
            ids = ctx.run.used.get(q, [])
            texts = ctx.passages(ids)
            found[q] = [texts[p] for p in ids if p in texts]
        rows = [q for q in ctx.turns if found[q]]
        if len(rows) < len(ctx.turns):
            ctx.warnings.append(f"{len(ctx.turns) - len(rows)} turns of run {ctx.run.name} have no used passage "
                                "with a text (not in the passages or index): no grounding measures for them")
        responses, passages = [ctx.responses[q] for q in rows], [found[q] for q in rows]
        kinds = {m.scorer for m in measures}
        values: dict[str, list[float | None]] = {}
        if "tokens" in kinds:
            values["k_precision"] = list(sc.k_precision(responses, passages))
        if "bertscore" in kinds:
            values["k_precision_bert"] = list(ctx.scorers.bert.k_precision(responses, passages))
        if "grounding" in kinds:
            values["rougeL_p"] = list(sc.rouge_l_grounding(responses, passages))
        if "citation" in kinds:
            values["coverage"] = list(sc.citation_coverage(ctx.scorers.embedder, responses, passages,
                                                           ctx.scorers.coverage_threshold))
        return Scored(rows, values)
