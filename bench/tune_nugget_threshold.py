"""Tune the embedding nugget matcher's cosine threshold on labelled (nugget, response) pairs of iKAT 2024.

Labels: each gold response lists the nuggets it was written from (``nuggets.matched``): those pairs are positives;
the matched nuggets of the other turns of the same conversation, paired with this response, are negatives.
The threshold maximising balanced accuracy on conversations 0, 1 and 4 is chosen and reported on 5-8.

    PYTHONPATH=src python bench/tune_nugget_threshold.py [../shared/ikat/2024-nuggets]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from ikatkit.evaluate.responses.data import Nugget
from ikatkit.evaluate.responses.nuggets import EmbeddingMatcher

TRAIN = {"0", "1", "4"}


def pairs(folder: Path) -> list[tuple[str, str, str, int]]:
    gold = json.loads((folder / "gold_responses_human.json").read_text(encoding="utf-8"))
    matched = {t: v["manual"]["nuggets"]["matched"] for t, v in gold.items()}
    out = []
    for turn, value in gold.items():
        response = value["manual"]["response"]
        if not response.strip():
            continue
        conversation = turn.split("_")[0]
        for other, texts in matched.items():
            if other.split("_")[0] == conversation:
                out += [(conversation, response, text, int(other == turn)) for text in texts]
    return out


def balanced_accuracy(sims: np.ndarray, labels: np.ndarray, threshold: float) -> float:
    predicted = sims >= threshold
    return float((predicted[labels == 1].mean() + (~predicted[labels == 0]).mean()) / 2)


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/ikat/2024-nuggets")
    data = pairs(folder)
    matcher = EmbeddingMatcher()
    sims = np.array([s[0] for s in matcher.similarities([r for _, r, _, _ in data],
                                                        [[Nugget("", n, 1)] for _, _, n, _ in data])])
    labels = np.array([y for *_, y in data])
    train = np.array([c in TRAIN for c, *_ in data])
    grid = np.round(np.arange(0.30, 0.96, 0.01), 2)
    scores = [balanced_accuracy(sims[train], labels[train], t) for t in grid]
    best = float(grid[int(np.argmax(scores))])
    print(f"pairs: train {train.sum()} ({labels[train].sum()} positive), test {(~train).sum()} "
          f"({labels[~train].sum()} positive)")
    print(f"threshold {best:.2f}: balanced accuracy train {max(scores):.3f}, "
          f"test {balanced_accuracy(sims[~train], labels[~train], best):.3f}")
    for t in (0.5, 0.6, 0.7, 0.8):
        print(f"  at {t:.2f}: train {balanced_accuracy(sims[train], labels[train], t):.3f}, "
              f"test {balanced_accuracy(sims[~train], labels[~train], t):.3f}")


if __name__ == "__main__":
    main()
