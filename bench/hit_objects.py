"""What 1,000 hits a query cost Python with the searcher loaded (its JVM and Pyserini: about half a million live
objects): 1,000 lists of 1,000 hits kept alive, as NamedTuples (the hits before issue 41) and as plain tuples (now),
with the startup heap frozen (``gc.freeze()``) and not; thread CPU seconds, best of 3.

    python bench/hit_objects.py INDEX   # any Lucene index, e.g. /work/scale-indexes/r50000/index
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from itertools import repeat
from typing import NamedTuple


class Former(NamedTuple):
    docid: str
    score: float


def kept_alive(make: Callable[[], list]) -> float:
    """Thread CPU seconds to make 1,000 lists, all kept alive."""
    kept = []
    start = time.thread_time()
    for _ in range(1000):
        kept.append(make())
    return time.thread_time() - start


def main() -> None:
    from ikatkit.retrieve.bm25 import Bm25Searcher

    Bm25Searcher(sys.argv[1])  # the JVM, Pyserini and the searcher alive, as in a run
    ids = [f"clueweb22-en0000-00-{i:05d}:{i % 7}" for i in range(1000)]
    scores = [i / 7 for i in range(1000)]
    makers = {"plain_tuples": lambda: list(zip(ids, scores)),
              "namedtuples": lambda: list(map(tuple.__new__, repeat(Former), zip(ids, scores)))}
    best: dict[str, float] = {}
    for _ in range(3):
        for frozen in (True, False):
            gc.freeze() if frozen else gc.unfreeze()
            for name, make in makers.items():
                key = f"{name}, heap {'frozen' if frozen else 'not frozen'}"
                best[key] = min(best.get(key, float("inf")), kept_alive(make))
    print(json.dumps({key: round(value, 3) for key, value in best.items()}, indent=2))


if __name__ == "__main__":
    main()
