"""PTKB statement ranking evaluation: per turn, ranked PTKB keys against 0/1 PTKB qrels."""

from __future__ import annotations

from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import EvalResult, evaluate
from ikatkit.evaluate.measures import PTKB_MEASURES
from ikatkit.evaluate.qrels import Qrels
from ikatkit.runs.model import Run


def ptkb_rankings(run: Run) -> dict[str, dict[str, float]]:
    """``{qid: {ptkb_key: score}}`` from the PTKB provenance of each turn's first response.

    The provenance is ranked by score, then by its order in the run (2024/2025 runs carry no scores), and
    scored ``n, n-1, ..., 1`` so that the evaluation sees exactly that order.
    """
    rankings = {}
    for turn in run.turns:
        responses = sorted(turn.responses, key=lambda r: r.rank)
        refs = responses[0].ptkb if responses else []
        missing = [i for i, p in enumerate(refs) if not p.key]
        if missing:
            raise IkatError(f"PTKB provenance {missing[0] + 1} of turn {turn.turn_id} has no key",
                            where=f"turn {turn.turn_id}", fix="pass the topics (--topics) to map statement texts to keys")
        ranked = sorted(enumerate(refs), key=lambda item: (-item[1].score, item[0]))
        rankings[turn.turn_id] = {p.key: float(len(ranked) - i) for i, (_, p) in enumerate(ranked)}
    return rankings


def evaluate_ptkb(rankings: dict[str, dict[str, float]] | Run, ptkb_qrels: Qrels | str | Path,
                  measures: list[str] | tuple[str, ...] | None = None, missing: str = "skip") -> EvalResult:
    """nDCG@5, P@5, R@5 and AP of PTKB rankings (turns with an empty ranking count as missing)."""
    if isinstance(rankings, Run):
        rankings = ptkb_rankings(rankings)
    return evaluate(rankings, ptkb_qrels, measures or PTKB_MEASURES, missing=missing)
