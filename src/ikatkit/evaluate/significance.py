"""Paired significance tests over per-query values (scipy), and multiple-testing correction (statsmodels)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

TESTS = ("ttest", "wilcoxon", "randomization")
CORRECTIONS = ("holm", "bonferroni", "none")


def paired_test(a: Sequence[float], b: Sequence[float], test: str = "ttest", permutations: int = 10_000,
                seed: int = 0) -> float:
    """Two-sided p-value of the paired difference ``b - a`` (nan when the runs never differ)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = y - x
    if len(diff) < 2 or not np.any(diff):
        return math.nan
    from scipy import stats  # here: it takes a second to import, and `ikatkit --help` reads TESTS

    if test == "ttest":
        return float(stats.ttest_rel(y, x).pvalue)
    if test == "wilcoxon":
        return float(stats.wilcoxon(y, x).pvalue)
    if test == "randomization":  # sign flips of the paired differences: exact when 2^n <= permutations
        result = stats.permutation_test((diff,), np.mean, permutation_type="samples", n_resamples=permutations,
                                        alternative="two-sided", rng=np.random.default_rng(seed))
        return float(result.pvalue)
    raise ValueError(f"unknown test {test!r}: use one of {TESTS}")


def correct(pvalues: list[float], method: str = "holm") -> list[float]:
    """Adjusted p-values (nan stays nan and is not counted as a test)."""
    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r}: use one of {CORRECTIONS}")
    live = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    adjusted = list(pvalues)
    if method == "none" or not live:
        return adjusted
    from statsmodels.stats.multitest import multipletests

    for i, p in zip(live, multipletests([pvalues[i] for i in live], method=method)[1]):
        adjusted[i] = float(p)
    return adjusted
