"""PTKB statement ranking evaluation: per turn, ranked PTKB keys against 0/1 PTKB qrels."""

from __future__ import annotations

from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import EvalResult, evaluate
from ikatkit.evaluate.measures import PTKB_MEASURES
from ikatkit.evaluate.ptkb_classify import ptkb_qrels_keys
from ikatkit.evaluate.qrels import Qrels, load_qrels
from ikatkit.runs.model import Run


def ptkb_order(scored: list[tuple[str, float]]) -> dict[str, float]:
    """PTKB keys ranked by score, ties in their given order, scored ``n, n-1, ..., 1`` so that the evaluation
    sees exactly that order: the one tie order of every PTKB evaluation (``eval-ptkb``, ``compare``, demo)."""
    ranked = sorted(enumerate(scored), key=lambda item: (-item[1][1], item[0]))
    return {key: float(len(ranked) - i) for i, (_, (key, _)) in enumerate(ranked)}


def ptkb_rankings(run: Run | dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """``{qid: {ptkb_key: score}}`` from the PTKB provenance of each turn's first response (or from such a dict),
    ordered by :func:`ptkb_order` (2024/2025 runs carry no scores: their order counts)."""
    if isinstance(run, dict):
        return {qid: ptkb_order(list(scores.items())) for qid, scores in run.items()}
    rankings = {}
    for turn in run.turns:
        responses = sorted(turn.responses, key=lambda r: r.rank)
        refs = responses[0].ptkb if responses else []
        missing = [i for i, p in enumerate(refs) if not p.key]
        if missing:
            raise IkatError(f"PTKB provenance {missing[0] + 1} of turn {turn.turn_id} has no key",
                            where=f"turn {turn.turn_id}",
                            fix="pass the topics (--topics) to map statement texts to keys")
        rankings[turn.turn_id] = ptkb_order([(p.key, p.score) for p in refs])
    return rankings


def evaluate_ptkb(rankings: dict[str, dict[str, float]] | Run, ptkb_qrels: Qrels | str | Path,
                  measures: list[str] | tuple[str, ...] | None = None, missing: str = "skip") -> EvalResult:
    """nDCG@5, P@5, R@5 and AP of PTKB rankings (turns with an empty ranking count as missing); the released 2025
    qrels' ``ptkb-<conversation>-<i>`` ids are read as keys (:func:`ptkb_qrels_keys`)."""
    rankings = ptkb_rankings(rankings)
    qrels = ptkb_qrels_keys(ptkb_qrels if isinstance(ptkb_qrels, dict) else load_qrels(ptkb_qrels))
    if not any(rankings.get(q) for q in qrels):
        raise IkatError(f"the run has no PTKB provenance for any of the {len(qrels)} judged turns",
                        fix="pass a run with PTKB provenance (or {qid: {ptkb_key: score}}) and the PTKB qrels")
    return evaluate(rankings, qrels, measures or PTKB_MEASURES, missing=missing)
