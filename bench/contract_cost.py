"""What enforcing stage contracts costs while running: ``run_stage`` around a stage that does nothing, per record
and stage, for records of GtR's shape at k=1000 (five candidate lists of 1,000 passages) and of an interactive BM25
turn (one list of 100); each record also holds ten history turns, ten PTKB statements and 100 passage texts.

    PYTHONPATH=src python bench/contract_cost.py [--repeats 50]
"""

from __future__ import annotations

import argparse
import time

from ikatkit.pipelines.base import Stage
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.pipeline import run_stage


class Nothing(Stage):
    name = "nothing"
    provides = ("response",)

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        return records


def record(i: int, candidates: int, lists: int) -> TurnRecord:
    found = {f"q{j}": [(f"clueweb22-en00{j}-{k:05d}:{k % 7}", 10.0 - k / 1000) for k in range(candidates)]
             for j in range(lists)}
    return TurnRecord(qid=f"1-1_{i}", utterance="u" * 100, history=[("u" * 100, "r" * 1000)] * 10,
                      ptkb_all={str(k): "s" * 80 for k in range(10)}, candidates=found, ranking=found["q0"],
                      passage_texts={f"p{k}": "t" * 1500 for k in range(100)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    for candidates, lists in ((1000, 5), (100, 1)):
        batch = [record(i, candidates, lists) for i in range(4)]
        start = time.perf_counter()
        for _ in range(args.repeats):
            run_stage(Nothing(), batch)
        ms = 1000 * (time.perf_counter() - start) / args.repeats / len(batch)
        print(f"{lists} list(s) of {candidates} candidates: {ms:.2f} ms per record per stage")


if __name__ == "__main__":
    main()
