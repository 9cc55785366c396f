"""Comparing runs on real data: the reference run against degraded copies made here."""

from __future__ import annotations

import json
import math
import random

import ir_measures
import pytest

from ikatkit.evaluate.compare import compare_runs
from ikatkit.evaluate.report import write_comparison, write_report
from ikatkit.evaluate.significance import correct, paired_test


@pytest.fixture(scope="module")
def runs(ikat2023):
    reference = json.loads((ikat2023 / "reference_run" / "splade_deberta_run.json").read_text())
    rng = random.Random(7)
    reversed_ = {q: {pid: -s for pid, s in docs.items()} for q, docs in reference.items()}
    truncated = {q: dict(sorted(docs.items(), key=lambda i: -i[1])[:3]) for q, docs in reference.items()}
    shuffled = {q: dict(zip(docs, rng.sample(sorted(docs.values()), len(docs)))) for q, docs in reference.items()}
    return {"reference": reference, "copy": dict(reference), "reversed": reversed_, "truncated": truncated,
            "shuffled": shuffled}


def test_significance_and_numbers(runs, ikat2023):
    comparison = compare_runs(runs, ikat2023 / "qrels.txt")
    rows = {(r["run"], r["measure"]): r for r in comparison.rows}
    assert rows[("reversed", "nDCG@5")]["p_adjusted"] < 0.05 and rows[("reversed", "nDCG@5")]["delta"] < 0
    assert rows[("shuffled", "nDCG@5")]["p_adjusted"] < 0.05
    assert math.isnan(rows[("copy", "nDCG@5")]["p"])
    assert (rows[("copy", "nDCG@5")]["wins"], rows[("copy", "nDCG@5")]["losses"]) == (0, 0)
    # the top 3 are kept; only score ties at rank 3 (broken by id in trec_eval) can differ
    assert rows[("truncated", "nDCG@3")]["delta"] == pytest.approx(0.0, abs=1e-3)
    qrels = list(ir_measures.read_trec_qrels(str(ikat2023 / "qrels.txt")))
    direct = ir_measures.calc_aggregate([ir_measures.parse_measure("AP(rel=2)")], qrels, runs["truncated"])
    assert rows[("truncated", "AP(rel=2)")]["mean"] == pytest.approx(next(iter(direct.values())), abs=1e-9)
    assert comparison.judged["truncated"][5] == pytest.approx(comparison.judged["reference"][5] * 3 / 5, abs=0.02)
    assert "| reversed |" in comparison.to_markdown() and r"\begin{tabular}" in comparison.to_latex()


def test_tests_and_corrections():
    a, b = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.3, 0.5, 0.4, 0.6, 0.9, 0.8]
    for test in ("ttest", "wilcoxon", "randomization"):
        assert 0 < paired_test(a, b, test) < 0.1
    assert math.isnan(paired_test(a, a))
    assert correct([0.01, 0.04, math.nan, 0.03], "holm") == pytest.approx([0.03, 0.06, math.nan, 0.06], nan_ok=True)
    assert correct([0.01, 0.5], "bonferroni") == [0.02, 1.0]


def test_plots_and_report(runs, ikat2023, tmp_path):
    subset = {k: runs[k] for k in ("reference", "reversed")}
    files = write_comparison(compare_runs(subset, ikat2023 / "qrels.txt"), tmp_path / "cmp")
    for path in files["plots"]:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert files["per_turn"].read_text().splitlines()[0] == "turn,reference,reversed"
    report = write_report(subset, ikat2023 / "qrels.txt", tmp_path / "report").read_text()
    assert report.count("data:image/png;base64,") == 2 and "<td>reversed</td>" in report
