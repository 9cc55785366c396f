"""Helpers shared by the benchmarks: synthetic ClueWeb22-style text and timing."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path

WORDS = ("protein vegetarian runner knee marathon training diet tofu lentils beans japan train rail pass hiking "
         "family budget phone android camera battery pasta sauce tomato basil olive oil garlic recovery muscle "
         "strength exercise stretch season autumn spring blossom crowd temple food travel hotel ticket price").split()


def sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(8, 20))
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def write_clueweb22(folder: Path, documents: int, files: int = 4, seed: int = 0) -> list[Path]:
    """Raw ClueWeb22 records with 12-40 sentences each, spread over ``files`` .json files."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"en0000-{i:02d}.json" for i in range(files)]
    handles = [open(p, "w", encoding="utf-8") for p in paths]
    for i in range(documents):
        text = "\n".join(" ".join(sentence(rng) for _ in range(rng.randint(3, 8))) for _ in range(rng.randint(3, 6)))
        handles[i % files].write(json.dumps({"URL": f"https://example.org/{i}", "ClueWeb22-ID":
                                             f"clueweb22-en{i // 100000:04d}-{(i // 1000) % 100:02d}-{i % 100000:05d}",
                                             "Clean-Text": text}) + "\n")
    for handle in handles:
        handle.close()
    return paths


def timed(function: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result
