"""Shared fixtures: the real iKAT data in ../shared/ikat (tests skip when it is absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "ikat"
IKAT_2023 = Path(os.environ.get("IKAT_DATA", SHARED)) / "2023"


@pytest.fixture(scope="session")
def ikat2023() -> Path:
    """The folder with the real iKAT 2023 topics, qrels, passages and reference run."""
    if not (IKAT_2023 / "test_topics.json").exists():
        pytest.skip(f"real iKAT data not found at {IKAT_2023} (set IKAT_DATA)")
    return IKAT_2023
