"""Measures against a reference response: ROUGE, BLEU (sacrebleu), token recall, BERTScore, embedding similarity."""

from __future__ import annotations

from ikatkit.evaluate.responses import scorers as sc
from ikatkit.evaluate.responses.measures import ResponseMeasure
from ikatkit.evaluate.responses.providers.base import Context, Provider, Scored, register


@register
class References(Provider):
    needs = "reference"
    evidence = "references"
    fix = "pass --topics (canonical responses) or --references"
    topic_turns = True

    def score(self, measures: list[ResponseMeasure], ctx: Context) -> Scored:
        rows = [q for q in ctx.turns if ctx.references.get(q, "").strip()]
        responses, references = [ctx.responses[q] for q in rows], [ctx.references[q] for q in rows]
        kinds = {m.scorer for m in measures}
        values: dict[str, list[float | None]] = {}
        if "rouge" in kinds:
            rouge: dict[str, list[float | None]] = {k: list(v) for k, v in sc.rouge(responses, references).items()}
            values.update(rouge)
        if "bleu" in kinds:
            values["bleu"] = list(sc.bleu(responses, references))
        if "tokens" in kinds:
            values["recall"] = list(sc.token_recall(responses, references))
        if "bertscore" in kinds:
            values.update({f"bert_{k}": list(v) for k, v in ctx.scorers.bert.score(responses, references).items()})
        if "embedding" in kinds:
            values["similarity"] = list(ctx.scorers.embedder.similarity(responses, references))
        return Scored(rows, values)
