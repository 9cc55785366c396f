"""The benchmarks' realistic synthetic collection (bench/realistic.py): fitted to the 894 real passages, and what
it generates shows the fitted statistics."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import realistic  # noqa: E402


def test_fits_recover_known_exponents():
    """Hand-made data: counts exactly 1000 r^-1.2; a token stream whose vocabulary grows as sqrt(T)."""
    counts = 1000.0 * np.arange(1, 2001) ** -1.2
    assert realistic.fit_zipf(counts) == pytest.approx(1.2, abs=1e-9)
    tokens = [str(int(np.sqrt(t))) for t in range(1, 200001)]  # word n first appears at token n^2
    k, beta = realistic.fit_heaps(tokens)
    assert beta == pytest.approx(0.5, abs=0.01) and k == pytest.approx(1.0, rel=0.1)


def test_generated_sample_follows_the_real_passages(ikat2023, monkeypatch):
    monkeypatch.setattr(realistic, "IKAT_2023", ikat2023)
    realistic.fit.cache_clear()
    found = realistic.check(20000)
    assert found["real_passages"] == 894 and 0.5 < found["heaps_beta"] < 0.8  # web text: 0.4-0.7
    assert found["zipf_s_generated"] == pytest.approx(found["zipf_s_real"], abs=0.05)
    assert found["vocabulary_generated"] == pytest.approx(found["vocabulary_heaps"], rel=0.1)
    assert found["mean_length_generated"] == pytest.approx(found["mean_length_real"], rel=0.05)
    assert found["repeat_share_generated"] == pytest.approx(found["repeat_share_real"], abs=0.05)
    generator = realistic.Generator(1000)
    queries = generator.queries(50)
    assert all(3 <= len(q.split()) <= 10 for q in queries)
    first = next(generator.chunks(100))
    assert first[0][0] == "clueweb22-en0000-00-00000:0" and first[11][0] == "clueweb22-en0000-00-00001:1"
    assert [pid for pid, _ in first] == [pid for pid, _ in next(realistic.Generator(1000).chunks(100))]  # seeded


def test_tail_words_are_distinct_and_not_english():
    words = [realistic.tail_word(rank) for rank in range(20000)]
    assert len(set(words)) == len(words) and all(w.startswith("q") and w.endswith("x") for w in words)
