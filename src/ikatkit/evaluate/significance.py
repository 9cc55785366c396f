"""Paired significance tests over per-query values, and multiple-testing correction."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

TESTS = ("ttest", "wilcoxon", "randomization")
CORRECTIONS = ("holm", "bonferroni", "none")


def paired_test(a: Sequence[float], b: Sequence[float], test: str = "ttest", permutations: int = 10_000,
                seed: int = 0) -> float:
    """Two-sided p-value of the paired difference ``b - a`` (nan when the runs never differ)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = y - x
    if len(diff) < 2 or not np.any(diff):
        return math.nan
    if test == "ttest":
        return float(stats.ttest_rel(y, x).pvalue)
    if test == "wilcoxon":
        return float(stats.wilcoxon(y, x).pvalue)
    if test == "randomization":
        rng = np.random.default_rng(seed)
        observed = abs(diff.mean())
        signs = rng.choice((-1.0, 1.0), size=(permutations, len(diff)))
        extreme = np.sum(np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12)
        return float((extreme + 1) / (permutations + 1))
    raise ValueError(f"unknown test {test!r}: use one of {TESTS}")


def correct(pvalues: list[float], method: str = "holm") -> list[float]:
    """Adjusted p-values (nan stays nan and is not counted as a test)."""
    live = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    adjusted = list(pvalues)
    m = len(live)
    if method == "none" or not m:
        return adjusted
    if method == "bonferroni":
        for i in live:
            adjusted[i] = min(1.0, pvalues[i] * m)
        return adjusted
    if method == "holm":
        running = 0.0
        for rank, i in enumerate(sorted(live, key=lambda i: pvalues[i])):
            running = max(running, min(1.0, (m - rank) * pvalues[i]))
            adjusted[i] = running
        return adjusted
    raise ValueError(f"unknown correction {method!r}: use one of {CORRECTIONS}")
