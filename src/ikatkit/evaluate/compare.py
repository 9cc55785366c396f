"""Compare runs: measures per run with 95% confidence intervals, deltas and corrected paired significance against
a baseline (or between all pairs), wins/ties/losses, judged fractions."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import EvalResult, Rankings, evaluate, rankings_of
from ikatkit.evaluate.measures import PTKB_MEASURES, TRACK_MEASURES, shown
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
    missing: str = "skip"
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)
    turns: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)

    def _row(self, name: str, measure: str) -> dict[str, Any]:
        return next(r for r in self.rows if r["run"] == name and r["measure"] == measure)

    def compact(self) -> list[list[str]]:
        """Runs x the measures compared (``--measures``): each mean with its mark against the baseline
        (:func:`significance_mark`) and, with judged fractions, the runs' judged@10."""
        measures = self.measures
        judged = 10 in JUDGED_DEPTHS and bool(self.judged)
        lines = [["run", *map(shown, measures), *(["judged@10"] if judged else [])]]
        for name in self.results:
            marks = [significance_mark(self._row(name, m)["p_adjusted"]) if name != self.baseline else ""
                     for m in measures]
            lines.append([name,
                          *(f"{self._row(name, m)['mean']:.4f}{mark}" for m, mark in zip(measures, marks)),
                          *([f"{self.judged[name][10]:.3f}"] if judged else [])])
        return lines

    def long_table(self) -> list[list[str]]:
        """One row per measure and run: mean, interval, and against the baseline delta, corrected p,
        wins/ties/losses and the turns they are over."""
        rows = [["run", "measure", "mean", "95% CI", "delta", f"p ({self.correction})", "wins/ties/losses",
                 "turns"]]
        for measure in self.measures:
            for row in (r for r in self.rows if r["measure"] == measure):
                base = row["run"] == self.baseline
                rows.append([row["run"], measure, f"{row['mean']:.4f}", format_interval(row["ci_low"], row["ci_high"]),
                             "" if base else f"{row['delta']:+.4f}", "" if base else format_p(row["p_adjusted"]),
                             "" if base else f"{row['wins']}/{row['ties']}/{row['losses']}", str(row["turns"])])
        return rows

    def judged_table(self) -> list[list[str]]:
        """Each run's judged@k at every depth."""
        return [["run", *(f"judged@{k}" for k in JUDGED_DEPTHS)],
                *([name, *(f"{self.judged[name][k]:.3f}" for k in JUDGED_DEPTHS)] for name in self.judged)]

    def pairs_table(self) -> list[list[str]]:
        """All pairs: per measure, the delta (second minus first run), wins/ties/losses and corrected p."""
        lines = [["run A", "run B", "measure", "delta (B - A)", "wins/ties/losses of B", "turns",
                  f"p ({self.correction})"]]
        for row in self.pairs:
            lines.append([row["run_a"], row["run_b"], row["measure"],
                          f"{row['delta']:+.4f}{significance_mark(row['p_adjusted'])}",
                          f"{row['wins']}/{row['ties']}/{row['losses']}", str(row["turns"]),
                          format_p(row["p_adjusted"])])
        return lines

    def legend(self) -> str:
        """What the compact table's marks mean."""
        return (f"{MARKS[0][1]} p < {MARKS[0][0]}, {MARKS[1][1]} p < {MARKS[1][0]} against {self.baseline} "
                f"({self.test}, {self.correction} correction over all tests of the table)"
                + ("; judged@10: share of a run's top 10 that is judged (ir-measures Judged@10) over the judged "
                   "turns it ranks." if self.judged else "."))

    def note(self) -> str:
        """The legend and which turns the figures are about."""
        return self.legend() + " " + self.turns_note()

    def turns_note(self) -> str:
        """Which turns every figure is about (the ``--missing`` rule) and how many turns each run ranks."""
        counts = sorted(set(self.turns.values()))
        over = (f"{counts[0]}" if len(counts) == 1 else
                "; ".join(f"{m}: {n}" for m, n in self.turns.items()) + " (per measure)")
        verb = "ranks" if self.judged else "answers"
        rule = (f"every judged turn, a turn a run does not {verb[:-1]} scored 0 (--missing zero)"
                if self.missing == "zero" else
                f"the turns every run {verb} (--missing skip; --missing zero scores the others 0)")
        text = (f"Means, intervals, deltas, tests and wins/ties/losses are over the {over} judged turns: {rule}; "
                + ", ".join(f"{name} {verb} {ranked} of the {ranked + unranked} judged turns ({unranked} unranked)"
                            for name, (ranked, unranked) in self.coverage.items()) + ".")
        if self.left_out:
            text += " Not in this table: " + "; ".join(f"{n}: {why}" for n, why in self.left_out.items()) + "."
        return text

    def to_markdown(self, full: bool = False) -> str:
        """The compact table and its note (what ``compare`` prints); ``full`` adds every figure per run and
        measure (interval, delta, p, wins/ties/losses) and judged@k (what comparison.md holds)."""
        text = [_markdown(self.compact()), "", self.note()]
        if full:
            text += ["", "Per run and measure (95% CI: Student-t interval of the mean; wins/ties/losses per turn):", "",
                     _markdown(self.long_table())]
            if self.judged:
                text += ["", _markdown(self.judged_table())]
        if self.pairs:
            text += ["", "All pairs:", "", _markdown(self.pairs_table())]
        return "\n".join(text)

    def to_csv(self) -> str:
        return _csv(self.rows)

    def pairs_csv(self) -> str:
        return _csv(self.pairs)

    def to_latex(self) -> str:
        """The compact table as a booktabs tabular, its legend as a comment above it."""
        rows = self.compact()
        body = [" & ".join(_latex(c) for c in r) + r" \\" for r in rows]
        return "\n".join([f"% {self.legend()}", r"\begin{tabular}{l" + "r" * (len(rows[0]) - 1) + "}", r"\toprule",
                          body[0], r"\midrule", *body[1:], r"\bottomrule", r"\end{tabular}"]) + "\n"


MARKS = ((0.05, "\u2020"), (0.01, "\u2021"))  # dagger: corrected p < 0.05; double dagger: p < 0.01


def significance_mark(p: float) -> str:
    """The compact table's mark of a corrected p-value: a double dagger below 0.01, a dagger below 0.05."""
    if math.isnan(p):
        return ""
    return MARKS[1][1] if p < MARKS[1][0] else MARKS[0][1] if p < MARKS[0][0] else ""


def _latex(cell: str) -> str:
    """A table cell in LaTeX: special characters escaped, the marks as math daggers."""
    cell = re.sub(r"[\\&%$#_{}]", lambda m: r"\textbackslash{}" if m.group() == "\\" else "\\" + m.group(), cell)
    return (cell.replace("<", "$<$").replace(MARKS[1][1], r"$^{\ddagger}$")
            .replace(MARKS[0][1], r"$^{\dagger}$"))


def format_interval(low: float, high: float) -> str:
    return "" if math.isnan(low) else f"[{low:.4f}, {high:.4f}]"


def format_p(value: float) -> str:
    """A p-value as papers print it: three decimals, ``< 0.001`` below that (the CSV keeps every digit)."""
    return "" if math.isnan(value) else "< 0.001" if value < 0.001 else f"{value:.3f}"


def _csv(rows: list[dict[str, Any]]) -> str:
    """Rows of one shape as CSV, the first row's keys as the header."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _markdown(rows: list[list[str]]) -> str:
    text = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(text + ["| " + " | ".join(r) + " |" for r in rows[1:]])


def _paired(a: dict[str, float], b: dict[str, float], turns: list[str], test: str) -> dict[str, Any]:
    """Delta of ``b`` over ``a`` (the mean paired difference), the paired p-value (nan where they never differ, as
    for a run against itself) and the wins/ties/losses of ``b``, all over ``turns``."""
    x = [a[q] for q in turns]
    y = [b[q] for q in turns]
    delta = sum(v - u for u, v in zip(x, y)) / len(turns) if turns else math.nan
    return {"delta": delta, "p": paired_test(x, y, test),
            "wins": sum(v > u for u, v in zip(x, y)), "ties": sum(v == u for u, v in zip(x, y)),
            "losses": sum(v < u for u, v in zip(x, y)), "turns": len(turns)}


def compare_runs(runs: dict[str, Any], qrels: Qrels | str | Path, baseline: str | None = None,
                 measures: list[str] | None = None, test: str = "ttest", correction: str = "holm",
                 missing: str = "skip", all_pairs: bool = False) -> Comparison:
    """Evaluate every run and test each against ``baseline`` (default: the first). ``missing="skip"``: every figure
    is over the judged turns every run ranks; ``"zero"``: over all judged turns, those a run lacks scored 0.
    ``all_pairs`` also tests every pair of runs (corrected over all those tests)."""
    qrels_name = "" if isinstance(qrels, dict) else str(qrels)
    qrels = qrels if isinstance(qrels, dict) else load_qrels(qrels)
    measures = list(measures or TRACK_MEASURES)
    rankings = {name: rankings_of(run) for name, run in runs.items()}
    results = {}
    for name, ranking in rankings.items():
        try:
            results[name] = evaluate(ranking, qrels, measures, missing=missing, source=qrels_name or None)
        except IkatError as err:
            raise IkatError(f"run {name!r}: {err.message}", path=err.path, where=err.where, fix=err.fix) from None
    baseline = baseline or next(iter(runs))
    if baseline not in runs:
        raise IkatError(f"baseline {baseline!r} is not among the runs {list(runs)}", where="--baseline",
                        fix="name one of the compared runs (NAME=PATH sets a run's name)")
    judged = {name: judged_fractions(r, qrels) for name, r in rankings.items()}
    return _compare(results, measures, baseline, test, correction, judged, all_pairs, _sources(runs), qrels_name,
                    missing)


def _common_turns(results: dict[str, EvalResult], measure: str) -> list[str]:
    """The turns every run has a value of ``measure`` for, in the first run's order."""
    first, *others = results.values()
    return [q for q, values in first.per_query.items()
            if measure in values and all(measure in r.per_query.get(q, {}) for r in others)]


def _on_turns(result: EvalResult, turns: dict[str, list[str]]) -> EvalResult:
    """``result`` restricted to ``turns`` per measure: its means, per-turn values and turn lists recomputed;
    ``missing`` keeps the judged turns the run lacks (scored 0 under ``missing="zero"``) and adds the turns it ranks
    that another run lacks (left out under ``"skip"``)."""
    keep = {m: set(t) for m, t in turns.items()}
    per_query = {q: {m: v for m, v in values.items() if q in keep.get(m, ())} for q, values in result.per_query.items()}
    per_query = {q: values for q, values in per_query.items() if values}
    mean = {m: sum(result.per_query[q][m] for q in t) / len(t) for m, t in turns.items()}
    evaluated = [q for q in result.evaluated if q in per_query]
    dropped = [q for q in result.evaluated if q not in per_query]
    return EvalResult(mean, per_query, evaluated, list(dict.fromkeys([*result.missing, *dropped])), result.info)


def _compare(results: dict[str, EvalResult], measures: list[str], baseline: str, test: str, correction: str,
             judged: dict[str, dict[int, float]], all_pairs: bool = False, sources: dict[str, str] | None = None,
             qrels_name: str = "", missing: str = "skip", left_out: dict[str, str] | None = None) -> Comparison:
    """Paired tests of every run against ``baseline`` (and of every pair, with ``all_pairs``), per measure on the
    turns every run has a value for: with ``missing="zero"`` the results hold every judged turn already."""
    turns = {m: _common_turns(results, m) for m in measures}
    empty = [m for m, t in turns.items() if not t]
    if empty:
        raise IkatError(f"no judged turn has a value of {empty[0]} in every run ({', '.join(results)})",
                        where="compare", fix="--missing zero scores the turns a run lacks as 0")
    coverage = {name: (len(r.evaluated), len(set(r.missing) - set(r.evaluated))) for name, r in results.items()}
    shared = {name: _on_turns(r, turns) for name, r in results.items()}
    rows: list[dict[str, Any]] = []
    for name, result in shared.items():
        for measure in measures:
            values = {q: v[measure] for q, v in result.per_query.items() if measure in v}
            low, high = confidence_interval([values[q] for q in turns[measure]])
            base = {q: v[measure] for q, v in shared[baseline].per_query.items() if measure in v}
            rows.append({"run": name, "measure": measure, "mean": result.mean[measure], "ci_low": low,
                         "ci_high": high, **_paired(base, values, turns[measure], test),
                         "evaluated": coverage[name][0], "missing": coverage[name][1]})
    for row, adjusted in zip(rows, correct([r["p"] for r in rows], correction)):
        row["p_adjusted"] = adjusted
    pairs: list[dict[str, Any]] = []
    if all_pairs:
        names = list(shared)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                for m in measures:
                    x = {q: v[m] for q, v in shared[a].per_query.items() if m in v}
                    y = {q: v[m] for q, v in shared[b].per_query.items() if m in v}
                    pairs.append({"run_a": a, "run_b": b, "measure": m, **_paired(x, y, turns[m], test)})
        for row, adjusted in zip(pairs, correct([r["p"] for r in pairs], correction)):
            row["p_adjusted"] = adjusted
    return Comparison(baseline, measures, shared, rows, judged, test, correction, pairs, sources or {}, qrels_name,
                      missing, coverage, {m: len(t) for m, t in turns.items()}, left_out or {})


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
    return _compare(results, list(results[baseline].mean), baseline, test, correction, {}, all_pairs, sources,
                    missing=options.get("missing", "skip"))


def compare_ptkb(runs: Mapping[str, Run | str | Path], ptkb_qrels: Qrels | str | Path, topics: Topics | None = None,
                 **options: Any) -> Comparison:
    """The runs' PTKB provenance rankings compared like passage rankings (``topics`` maps 2025 texts to keys).
    A run with no PTKB provenance on any judged turn is left out of this comparison and named in its note (the
    baseline then is the first run left)."""
    from ikatkit.runs.io import read_run

    qrels_name = "" if isinstance(ptkb_qrels, dict) else str(ptkb_qrels)
    qrels = ptkb_qrels if isinstance(ptkb_qrels, dict) else load_qrels(ptkb_qrels)
    rankings = {name: ptkb_rankings(run if isinstance(run, Run) else read_run(run, topics=topics))
                for name, run in runs.items()}
    left_out = {name: f"no PTKB provenance on any of the {len(qrels)} judged turns (left out of this table)"
                for name, ranking in rankings.items() if not any(ranking.get(q) for q in qrels)}
    kept = {name: ranking for name, ranking in rankings.items() if name not in left_out}
    if not kept:
        raise IkatError(f"no run has PTKB provenance on any of the {len(qrels)} turns of the PTKB qrels "
                        f"({', '.join(runs)})", path=qrels_name or None,
                        fix="pass runs that rank PTKB statements, the PTKB qrels of their year (and --topics for 2025)")
    if options.get("baseline") in left_out:
        options["baseline"] = None
    comparison = compare_runs(kept, qrels, measures=list(options.pop("measures", None) or PTKB_MEASURES), **options)
    comparison.sources = {name: path for name, path in _sources(runs).items() if name in kept}
    comparison.qrels, comparison.left_out = qrels_name, left_out
    return comparison


def _sources(runs: Mapping[str, Any]) -> dict[str, str]:
    """Each run's file, or "(in memory)" for runs passed as objects."""
    return {name: str(run) if isinstance(run, (str, Path)) else "(in memory)" for name, run in runs.items()}
