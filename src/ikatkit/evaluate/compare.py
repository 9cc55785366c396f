"""Compare runs: measures per run, paired significance against a baseline, wins/ties/losses, judged fractions."""

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


def judged_fraction(rankings: Rankings, qrels: Qrels, k: int) -> float:
    """Mean over judged turns of the fraction of the top-k passages that have a judgement."""
    fractions = []
    for qid, docs in rankings.items():
        if qid in qrels and docs:
            top = sorted(docs.items(), key=lambda item: (-item[1], item[0]))[:k]
            fractions.append(sum(pid in qrels[qid] for pid, _ in top) / k)
    return sum(fractions) / len(fractions) if fractions else 0.0


@dataclass
class Comparison:
    """One row per (run, measure): mean, delta and p-value against the baseline, wins/ties/losses."""

    baseline: str
    measures: list[str]
    results: dict[str, EvalResult]
    rows: list[dict[str, Any]] = field(default_factory=list)
    judged: dict[str, dict[int, float]] = field(default_factory=dict)
    test: str = "ttest"
    correction: str = "holm"

    def table(self) -> list[list[str]]:
        depths = JUDGED_DEPTHS if self.judged else ()
        header = ["run"] + self.measures + [f"judged@{k}" for k in depths]
        lines = [header]
        for name in self.results:
            cells = [name]
            for measure in self.measures:
                row = next(r for r in self.rows if r["run"] == name and r["measure"] == measure)
                mark = ""
                if name != self.baseline and not math.isnan(row["p_adjusted"]) and row["p_adjusted"] < 0.05:
                    mark = "*"
                extra = "" if name == self.baseline else f" ({row['wins']}/{row['ties']}/{row['losses']})"
                cells.append(f"{row['mean']:.4f}{mark}{extra}")
            cells += [f"{self.judged[name][k]:.3f}" for k in depths]
            lines.append(cells)
        return lines

    def to_markdown(self) -> str:
        rows = self.table()
        text = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        text += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        text.append(f"\n`*` p < 0.05 against {self.baseline} ({self.test}, {self.correction} correction); "
                    "(wins/ties/losses) per judged turn" + ("; judged@k: fraction of the top k with a judgement."
                                                           if self.judged else "."))
        return "\n".join(text)

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(self.rows[0]))
        writer.writeheader()
        writer.writerows(self.rows)
        return out.getvalue()

    def to_latex(self) -> str:
        rows = self.table()
        body = [" & ".join(c.replace("_", r"\_").replace("%", r"\%") for c in r) + r" \\" for r in rows]
        return "\n".join([r"\begin{tabular}{l" + "r" * (len(rows[0]) - 1) + "}", r"\toprule", body[0], r"\midrule",
                          *body[1:], r"\bottomrule", r"\end{tabular}"]) + "\n"


def compare_runs(runs: dict[str, Any], qrels: Qrels | str | Path, baseline: str | None = None,
                 measures: list[str] | None = None, test: str = "ttest", correction: str = "holm",
                 missing: str = "skip") -> Comparison:
    """Evaluate every run and test each against ``baseline`` (default: the first) on their common judged turns;
    ``missing="zero"`` scores the judged turns a run lacks as 0, so every run is tested on all judged turns."""
    qrels = qrels if isinstance(qrels, dict) else load_qrels(qrels)
    measures = list(measures or TRACK_MEASURES)
    rankings = {name: rankings_of(run) for name, run in runs.items()}
    results = {name: evaluate(r, qrels, measures, missing=missing) for name, r in rankings.items()}
    baseline = baseline or next(iter(runs))
    if baseline not in runs:
        raise IkatError(f"baseline {baseline!r} is not among the runs {list(runs)}", where="--baseline",
                        fix="name one of the compared runs (NAME=PATH sets a run's name)")
    judged = {name: {k: judged_fraction(r, qrels, k) for k in JUDGED_DEPTHS} for name, r in rankings.items()}
    return _compare(results, measures, baseline, test, correction, judged)


def _compare(results: dict[str, EvalResult], measures: list[str], baseline: str, test: str, correction: str,
             judged: dict[str, dict[int, float]]) -> Comparison:
    """Paired tests of every run against ``baseline``, per measure on the turns both runs have a value for."""
    rows: list[dict[str, Any]] = []
    base = results[baseline].per_query
    for name, result in results.items():
        for measure in measures:
            common = sorted(q for q in set(base) & set(result.per_query)
                            if measure in base[q] and measure in result.per_query[q])
            a = [base[q][measure] for q in common]
            b = [result.per_query[q][measure] for q in common]
            p = math.nan if name == baseline else paired_test(a, b, test)
            rows.append({"run": name, "measure": measure, "mean": result.mean[measure],
                         "delta": result.mean[measure] - results[baseline].mean[measure], "p": p,
                         "wins": sum(y > x for x, y in zip(a, b)), "ties": sum(y == x for x, y in zip(a, b)),
                         "losses": sum(y < x for x, y in zip(a, b)), "turns": len(common)})
    for row, adjusted in zip(rows, correct([r["p"] for r in rows], correction)):
        row["p_adjusted"] = adjusted
    return Comparison(baseline, measures, results, rows, judged, test, correction)


def compare_responses(runs: Any, baseline: str | None = None, measures: list[str] | None = None,
                      test: str = "ttest", correction: str = "holm", **options: Any) -> Comparison:
    """Response measures of runs (``evaluate_response_runs`` inputs and ``options``) compared like rankings:
    paired tests against ``baseline`` (default: the first run) on the turns both runs have a value for."""
    from ikatkit.evaluate.responses.evaluate import evaluate_response_runs

    results = evaluate_response_runs(runs, measures=measures, **options)
    baseline = baseline or next(iter(results))
    if baseline not in results:
        raise IkatError(f"baseline {baseline!r} is not among the runs {list(results)}", where="--baseline",
                        fix="name one of the compared runs (NAME=PATH sets a run's name)")
    return _compare(results, list(results[baseline].mean), baseline, test, correction, {})


def compare_ptkb(runs: dict[str, Run | str | Path], ptkb_qrels: Qrels | str | Path, topics: Topics | None = None,
                 **options: Any) -> Comparison:
    """The runs' PTKB provenance rankings compared like passage rankings (``topics`` maps 2025 texts to keys)."""
    from ikatkit.runs.io import read_run

    rankings = {name: ptkb_rankings(run if isinstance(run, Run) else read_run(run, topics=topics))
                for name, run in runs.items()}
    return compare_runs(rankings, ptkb_qrels, measures=list(options.pop("measures", None) or PTKB_MEASURES),
                        **options)
