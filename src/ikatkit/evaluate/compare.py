"""Compare runs: measures per run with 95% confidence intervals, deltas and corrected paired significance against
a baseline (or between all pairs), wins/ties/losses, judged fractions."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import EvalResult, Rankings, evaluate, rankings_of
from ikatkit.evaluate.measures import PTKB_MEASURES, TRACK_MEASURES
from ikatkit.evaluate.ptkb import ptkb_rankings
from ikatkit.evaluate.qrels import Qrels, load_qrels
from ikatkit.evaluate.significance import correct, paired_test
from ikatkit.runs.model import Run
from ikatkit.topics import Topics

JUDGED_DEPTHS = (5, 10, 20)
CONFIDENCE = 0.95


def confidence_interval(values: list[float], level: float = CONFIDENCE) -> tuple[float, float]:
    """Student-t interval of the mean of per-turn values (nan, nan with fewer than two turns)."""
    from scipy import stats

    if len(values) < 2:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    sem = stats.sem(values)
    if sem == 0:
        return mean, mean
    low, high = stats.t.interval(level, len(values) - 1, loc=mean, scale=sem)
    return float(low), float(high)


def judged_fractions(rankings: Rankings, qrels: Qrels, depths: tuple[int, ...] = JUDGED_DEPTHS) -> dict[int, float]:
    """ir-measures' ``Judged@k`` for each depth: the fraction of the top k passages (of all returned, when fewer)
    that have a judgement, averaged over the judged turns the run answers."""
    import ir_measures

    answered = [qid for qid, docs in rankings.items() if qid in qrels and docs]
    if not answered:
        return dict.fromkeys(depths, 0.0)
    means = ir_measures.calc_aggregate([ir_measures.Judged @ k for k in depths], {q: qrels[q] for q in answered},
                                       {q: rankings[q] for q in answered})
    return {k: means[ir_measures.Judged @ k] for k in depths}


@dataclass
class Comparison:
    """One row per (run, measure): mean and its 95% interval; delta, p-value (raw and corrected) and
    wins/ties/losses against the baseline. With ``pairs``, the same for every pair of runs."""

    baseline: str
    measures: list[str]
    results: dict[str, EvalResult]
    rows: list[dict[str, Any]] = field(default_factory=list)
    judged: dict[str, dict[int, float]] = field(default_factory=dict)
    test: str = "ttest"
    correction: str = "holm"
    pairs: list[dict[str, Any]] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    qrels: str = ""

    def _row(self, name: str, measure: str) -> dict[str, Any]:
        return next(r for r in self.rows if r["run"] == name and r["measure"] == measure)

    def table(self) -> list[list[str]]:
        """Per measure: mean (``*`` significant) with wins/ties/losses, 95% interval, delta and corrected p."""
        header = ["run"]
        for measure in self.measures:
            header += [measure, f"{measure} 95% CI", f"{measure} delta", f"{measure} p ({self.correction})"]
        depths = JUDGED_DEPTHS if self.judged else ()
        lines = [header + [f"judged@{k}" for k in depths]]
        for name in self.results:
            cells = [name]
            for measure in self.measures:
                row = self._row(name, measure)
                base = name == self.baseline
                mark = "*" if not base and not math.isnan(row["p_adjusted"]) and row["p_adjusted"] < 0.05 else ""
                extra = "" if base else f" ({row['wins']}/{row['ties']}/{row['losses']})"
                cells += [f"{row['mean']:.4f}{mark}{extra}", _interval(row["ci_low"], row["ci_high"]),
                          "" if base else f"{row['delta']:+.4f}", "" if base else _p(row["p_adjusted"])]
            cells += [f"{self.judged[name][k]:.3f}" for k in depths]
            lines.append(cells)
        return lines

    def pairs_table(self) -> list[list[str]]:
        """All pairs: per measure, the delta (second minus first run), wins/ties/losses and corrected p."""
        lines = [["run A", "run B", "measure", "delta (B - A)", "wins/ties/losses of B", "turns",
                  f"p ({self.correction})"]]
        for row in self.pairs:
            mark = "*" if not math.isnan(row["p_adjusted"]) and row["p_adjusted"] < 0.05 else ""
            lines.append([row["run_a"], row["run_b"], row["measure"], f"{row['delta']:+.4f}{mark}",
                          f"{row['wins']}/{row['ties']}/{row['losses']}", str(row["turns"]), _p(row["p_adjusted"])])
        return lines

    def note(self) -> str:
        return (f"`*` p < 0.05 against {self.baseline} ({self.test}, {self.correction} correction over all tests "
                "of the table); (wins/ties/losses) per judged turn; 95% CI: Student-t interval of the mean over "
                "the evaluated turns" + ("; judged@k: share of the top k judged (ir-measures Judged@k)."
                                          if self.judged else "."))

    def to_markdown(self) -> str:
        text = [_markdown(self.table()), "", self.note()]
        if self.pairs:
            text += ["", "All pairs:", "", _markdown(self.pairs_table())]
        return "\n".join(text)

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(self.rows[0]))
        writer.writeheader()
        writer.writerows(self.rows)
        return out.getvalue()

    def pairs_csv(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(self.pairs[0]))
        writer.writeheader()
        writer.writerows(self.pairs)
        return out.getvalue()

    def to_latex(self) -> str:
        rows = self.table()
        body = [" & ".join(c.replace("_", r"\_").replace("%", r"\%") for c in r) + r" \\" for r in rows]
        return "\n".join([r"\begin{tabular}{l" + "r" * (len(rows[0]) - 1) + "}", r"\toprule", body[0], r"\midrule",
                          *body[1:], r"\bottomrule", r"\end{tabular}"]) + "\n"


def _interval(low: float, high: float) -> str:
    return "" if math.isnan(low) else f"[{low:.4f}, {high:.4f}]"


def _p(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.4f}"


def _markdown(rows: list[list[str]]) -> str:
    text = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(text + ["| " + " | ".join(r) + " |" for r in rows[1:]])


def _paired(a: EvalResult, b: EvalResult, measure: str, test: str) -> dict[str, Any]:
    """Delta of ``b`` over ``a``; on their common turns the paired p-value (nan where they never differ, as for
    a run against itself) and the wins/ties/losses of ``b``."""
    common = sorted(q for q in set(a.per_query) & set(b.per_query)
                    if measure in a.per_query[q] and measure in b.per_query[q])
    x = [a.per_query[q][measure] for q in common]
    y = [b.per_query[q][measure] for q in common]
    return {"delta": b.mean[measure] - a.mean[measure], "p": paired_test(x, y, test),
            "wins": sum(v > u for u, v in zip(x, y)), "ties": sum(v == u for u, v in zip(x, y)),
            "losses": sum(v < u for u, v in zip(x, y)), "turns": len(common)}


def compare_runs(runs: dict[str, Any], qrels: Qrels | str | Path, baseline: str | None = None,
                 measures: list[str] | None = None, test: str = "ttest", correction: str = "holm",
                 missing: str = "skip", all_pairs: bool = False) -> Comparison:
    """Evaluate every run and test each against ``baseline`` (default: the first) on their common judged turns;
    ``missing="zero"`` scores the judged turns a run lacks as 0, so every run is tested on all judged turns.
    ``all_pairs`` also tests every pair of runs (corrected over all those tests)."""
    qrels_name = "" if isinstance(qrels, dict) else str(qrels)
    qrels = qrels if isinstance(qrels, dict) else load_qrels(qrels)
    measures = list(measures or TRACK_MEASURES)
    rankings = {name: rankings_of(run) for name, run in runs.items()}
    results = {name: evaluate(r, qrels, measures, missing=missing) for name, r in rankings.items()}
    baseline = baseline or next(iter(runs))
    if baseline not in runs:
        raise IkatError(f"baseline {baseline!r} is not among the runs {list(runs)}", where="--baseline",
                        fix="name one of the compared runs (NAME=PATH sets a run's name)")
    judged = {name: judged_fractions(r, qrels) for name, r in rankings.items()}
    return _compare(results, measures, baseline, test, correction, judged, all_pairs, _sources(runs), qrels_name)


def _compare(results: dict[str, EvalResult], measures: list[str], baseline: str, test: str, correction: str,
             judged: dict[str, dict[int, float]], all_pairs: bool = False, sources: dict[str, str] | None = None,
             qrels_name: str = "") -> Comparison:
    """Paired tests of every run against ``baseline`` (and of every pair, with ``all_pairs``), per measure on the
    turns both runs have a value for."""
    rows: list[dict[str, Any]] = []
    for name, result in results.items():
        for measure in measures:
            low, high = confidence_interval([v[measure] for v in result.per_query.values() if measure in v])
            paired = _paired(results[baseline], result, measure, test)
            rows.append({"run": name, "measure": measure, "mean": result.mean[measure], "ci_low": low,
                         "ci_high": high, **paired, "evaluated": len(result.evaluated),
                         "missing": len(result.missing)})
    for row, adjusted in zip(rows, correct([r["p"] for r in rows], correction)):
        row["p_adjusted"] = adjusted
    pairs: list[dict[str, Any]] = []
    if all_pairs:
        names = list(results)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                pairs += [{"run_a": a, "run_b": b, "measure": m, **_paired(results[a], results[b], m, test)}
                          for m in measures]
        for row, adjusted in zip(pairs, correct([r["p"] for r in pairs], correction)):
            row["p_adjusted"] = adjusted
    return Comparison(baseline, measures, results, rows, judged, test, correction, pairs, sources or {}, qrels_name)


def compare_responses(runs: Any, baseline: str | None = None, measures: list[str] | None = None,
                      test: str = "ttest", correction: str = "holm", all_pairs: bool = False,
                      **options: Any) -> Comparison:
    """Response measures of runs (``evaluate_response_runs`` inputs and ``options``) compared like rankings:
    paired tests against ``baseline`` (default: the first run) on the turns both runs have a value for."""
    from ikatkit.evaluate.responses.evaluate import evaluate_response_runs

    results = evaluate_response_runs(runs, measures=measures, **options)
    baseline = baseline or next(iter(results))
    if baseline not in results:
        raise IkatError(f"baseline {baseline!r} is not among the runs {list(results)}", where="--baseline",
                        fix="name one of the compared runs (NAME=PATH sets a run's name)")
    sources = _sources(runs) if isinstance(runs, dict) else {}
    return _compare(results, list(results[baseline].mean), baseline, test, correction, {}, all_pairs, sources)


def compare_ptkb(runs: dict[str, Run | str | Path], ptkb_qrels: Qrels | str | Path, topics: Topics | None = None,
                 **options: Any) -> Comparison:
    """The runs' PTKB provenance rankings compared like passage rankings (``topics`` maps 2025 texts to keys)."""
    from ikatkit.runs.io import read_run

    rankings = {name: ptkb_rankings(run if isinstance(run, Run) else read_run(run, topics=topics))
                for name, run in runs.items()}
    comparison = compare_runs(rankings, ptkb_qrels, measures=list(options.pop("measures", None) or PTKB_MEASURES),
                              **options)
    comparison.sources = _sources(runs)
    return comparison


def _sources(runs: dict[str, Any]) -> dict[str, str]:
    """Each run's file, or "(in memory)" for runs passed as objects."""
    return {name: str(run) if isinstance(run, (str, Path)) else "(in memory)" for name, run in runs.items()}
