"""Evaluate rankings against qrels with ir-measures: means and per-query values."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import ir_measures

from ikatkit.errors import IkatError
from ikatkit.evaluate.measures import TRACK_MEASURES, TREC_EVAL_CUTS, parse_measures, shown
from ikatkit.evaluate.qrels import Qrels, load_qrels
from ikatkit.runs.model import Run

log = logging.getLogger(__name__)

Rankings = dict[str, dict[str, float]]
LOW_OVERLAP = 0.05  # below this share of judged top-10 passages, evaluation warns or refuses (check_overlap)
POOLED_MIN = 20  # judged top-10 ids needed before a low share judged for their own turn means mismatched turns
MISMATCHED = 0.01  # below this share of those judged for their own turn, the turns are another year's (refused)


@dataclass
class EvalResult:
    """``mean`` and ``per_query`` keyed by measure name; the judged turns evaluated and missed; ``info``: what
    response evaluation used (models, matcher), turns without nuggets and counted warnings."""

    mean: dict[str, float]
    per_query: dict[str, dict[str, float]]
    evaluated: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self, per_query: bool = False) -> dict[str, Any]:
        """Means, the count of judged turns evaluated, the judged turns missing (and per-query values)."""
        data: dict[str, Any] = {"mean": self.mean, "evaluated": len(self.evaluated), "missing": self.missing}
        if self.info:
            data["info"] = self.info
        if per_query:
            data["per_query"] = self.per_query
        return data

    def to_tsv(self, per_query: bool = False) -> str:
        """``measure<TAB>qid|all<TAB>value`` lines, as trec_eval prints them."""
        lines = [f"{shown(m)}\tall\t{v:.6f}" for m, v in self.mean.items()]
        if per_query:
            lines += [f"{shown(m)}\t{q}\t{v:.6f}" for q, values in self.per_query.items() for m, v in values.items()]
        return "\n".join(lines) + "\n"


def rankings_of(run: Run | Rankings | str | Path) -> Rankings:
    """``{qid: {docid: score}}`` from a Run, such a dict, or any run file ``read_run`` reads."""
    if isinstance(run, Run):
        return run.trec_ranking()
    if isinstance(run, dict):
        return run
    from ikatkit.runs.io import read_run

    return read_run(run).trec_ranking()

def _looks_like_ptkb(ids: set[str]) -> bool:
    """PTKB keys are small integers (2025 qrels: ``ptkb-<conversation>-<i>``); passage ids are
    ``doc_id:passage_no``."""
    return bool(ids) and all(i.isdigit() or i.startswith("ptkb-") for i in ids)


def check_overlap(rankings: Rankings, qrels: Qrels, evaluated: list[str], source: str | Path | None = None) -> None:
    """One clear error where the run and the qrels (``source``: their file) cannot be about the same turns and ids:
    no judged turn ranked, no id in the qrels of those turns (another collection, or PTKB qrels given for passages
    and the reverse), or the turns mismatched (another year's qrels or topics: of the run's top-10 ids that the
    qrels judge for some turn, under ``MISMATCHED`` are judged for the turn that ranks them, over at least
    ``POOLED_MIN`` such ids). A warning where under ``LOW_OVERLAP`` of the run's top-10 ids are judged for any turn
    (ids the pool never saw: another collection or kind); a run over part of the collection, whose ids are the
    judged ones or none, gets none."""
    if not evaluated:
        ranked = [q for q in rankings if rankings[q]]
        shown = ", ".join(repr(q) for q in ranked[:2]) or "none"
        raise IkatError(f"the run ranks nothing for any of the {len(qrels)} judged turns: none of its "
                        f"{len(ranked)} turn ids ranking something (e.g. {shown}) is among the qrels' turn ids "
                        f"(e.g. {', '.join(repr(q) for q in list(qrels)[:2])})", path=source,
                        fix="pass the qrels of the run's year and topics (turn ids must match)")
    run_ids = {d for q in evaluated for d in rankings[q]}
    qrels_ids = {d for q in evaluated for d in qrels[q]}
    if not run_ids & qrels_ids:
        if _looks_like_ptkb(qrels_ids) and not _looks_like_ptkb(run_ids):
            fix = "these look like PTKB qrels (ids such as '3' or 'ptkb-9-1-0'): use `ikatkit eval-ptkb` with " \
                  "them, or pass the passage qrels (e.g. 2023 qrels.txt)"
        elif _looks_like_ptkb(run_ids) and not _looks_like_ptkb(qrels_ids):
            fix = "these look like passage qrels: PTKB rankings go with PTKB qrels (e.g. 2023 ptkb_qrels.nist.txt)"
        else:
            fix = "pass the qrels of the run's collection and year"
        raise IkatError(f"no id the run ranks on its {len(evaluated)} judged turns occurs in the qrels of those "
                        f"turns (run: e.g. {sorted(run_ids)[0]!r}; qrels: e.g. {sorted(qrels_ids)[0]!r})",
                        path=source, fix=fix)
    top = [(q, d) for q in evaluated for d in islice(sorted(rankings[q], key=lambda d: -rankings[q][d]), 10)]
    pool = {d for judged in qrels.values() for d in judged}
    pooled = [(q, d) for q, d in top if d in pool]
    own = sum(d in qrels[q] for q, d in pooled)
    if len(pooled) >= POOLED_MIN and own < MISMATCHED * len(pooled):
        raise IkatError(f"the run's turns are not the qrels' turns: it ranks {len(evaluated)} of the {len(qrels)} "
                        f"judged turns, and of the {len(pooled)} ids in its top 10 there that the qrels judge for "
                        f"some turn, {own} are judged for the turn that ranks them ({100 * own / len(pooled):.1f}%; "
                        "BM25 over the 894 passages the 2023 topics cite, with the 2023 qrels: 20.3%)", path=source,
                        fix="pass the qrels of the run's year and topics (another year's turns share ids such as "
                            f"{evaluated[0]!r}), or the run of these qrels' topics")
    if len(pooled) < LOW_OVERLAP * len(top):
        log.warning("only %.1f%% of the run's top-10 ids on its %d judged turns are judged in the qrels (for any "
                    "turn): check that the run and the qrels are of the same collection, year and kind",
                    100 * len(pooled) / len(top), len(evaluated))


def evaluate(run: Run | Rankings | str | Path, qrels: Qrels | str | Path,
             measures: list[str] | tuple[str, ...] | None = None, missing: str = "skip", *,
             source: str | Path | None = None, fit: bool = True) -> EvalResult:
    """Evaluate over the judged turns the run answers (as trec_eval does); ``missing="zero"`` also counts the
    judged turns the run lacks, with 0 for every measure. trec_eval names with a cut (``mrr_10``, ``ndcg_cut_5``)
    see each turn's ranking cut at N in its own order first. A run that answers no judged turn, or whose rankings do
    not fit the qrels (:func:`check_overlap`, unless ``fit`` is False), is an error naming ``source`` (the qrels
    file, when ``qrels`` is the loaded dict)."""
    rankings = rankings_of(run)
    if not isinstance(qrels, dict):
        source, qrels = source or qrels, load_qrels(qrels)
    names = list(dict.fromkeys(measures or TRACK_MEASURES))
    parsed = parse_measures(names)
    judged = list(qrels)
    evaluated = [q for q in rankings if q in qrels and rankings[q]]
    if fit:
        check_overlap(rankings, qrels, evaluated, source)
    per_query: dict[str, dict[str, float]] = {q: {} for q in evaluated}
    groups: dict[int | None, list[tuple[str, Any]]] = {}
    for name, measure in zip(names, parsed):
        groups.setdefault(TREC_EVAL_CUTS.get(name), []).append((name, measure))
    for cut, items in groups.items():
        ranked = {q: dict(islice(rankings[q].items(), cut)) if cut else rankings[q] for q in evaluated}
        unique = list({str(m): m for _, m in items}.values())
        for metric in ir_measures.iter_calc(unique, qrels, ranked):
            if metric.query_id in per_query:  # ir-measures also reports judged turns the run lacks
                for name, measure in items:
                    if str(measure) == str(metric.measure):
                        per_query[metric.query_id][name] = float(metric.value)
    per_query = {q: {n: values[n] for n in names if n in values} for q, values in per_query.items()}  # asked order
    lacking = [q for q in judged if q not in per_query]
    if missing == "zero":
        for q in lacking:
            per_query[q] = {n: 0.0 for n in names}
    count = max(len(per_query), 1)
    mean = {n: sum(v.get(n, 0.0) for v in per_query.values()) / count for n in names}
    return EvalResult(mean, per_query, evaluated, lacking)
