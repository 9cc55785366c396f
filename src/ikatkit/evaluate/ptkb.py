"""PTKB statement ranking evaluation: per turn, ranked PTKB keys against 0/1 PTKB qrels."""

from __future__ import annotations

from pathlib import Path

from ikatkit.evaluate.evaluate import EvalResult, evaluate
from ikatkit.evaluate.measures import PTKB_MEASURES
from ikatkit.evaluate.qrels import Qrels
from ikatkit.runs.model import Run


def ptkb_rankings(run: Run) -> dict[str, dict[str, float]]:
    """``{qid: {ptkb_key: score}}`` from the PTKB provenance of each turn's first response."""
    rankings = {}
    for turn in run.turns:
        responses = sorted(turn.responses, key=lambda r: r.rank)
        rankings[turn.turn_id] = {p.key: p.score for p in responses[0].ptkb} if responses else {}
    return rankings


def evaluate_ptkb(rankings: dict[str, dict[str, float]] | Run, ptkb_qrels: Qrels | str | Path,
                  measures: list[str] | tuple[str, ...] = PTKB_MEASURES, missing: str = "skip") -> EvalResult:
    """nDCG@5, P@5, R@5 and AP of PTKB rankings (turns with an empty ranking count as missing)."""
    if isinstance(rankings, Run):
        rankings = ptkb_rankings(rankings)
    return evaluate(rankings, ptkb_qrels, measures, missing=missing)
