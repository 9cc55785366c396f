"""Search latency over partitions: the whole index against one of M partitions, same queries, one run.

A synthetic collection (``common.sentence``) is indexed whole and partitioned into M indexes by a category
(the id's stream number, round robin, so partitions are equal and no embedding is needed: the strategy does not
change search cost). Both sides run through ``PartitionedSearcher`` (all partitions = the whole index's ranking),
k=1000, on the searcher's threads; the anchor is searching all partitions, measured in the same run.

    python bench/bench_partitions.py --passages 2000000 --partitions 8
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import sentence, timed  # noqa: E402

from ikatkit.index.build import build_index  # noqa: E402
from ikatkit.partition.build import partition_index  # noqa: E402
from ikatkit.retrieve.partitioned import PartitionedSearcher  # noqa: E402
from ikatkit.retrieve.bm25 import Bm25Searcher  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--work", help="keep the indexes here (reused when run again) instead of a temporary folder")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ikatkit-bench-partitions-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rng = random.Random(1)
        collection = work / "p.jsonl"
        if not collection.exists():
            with open(work / "p.tmp", "w", encoding="utf-8") as handle:
                for i in range(args.passages):
                    text = " ".join(sentence(rng) for _ in range(rng.randint(5, 10)))
                    handle.write(json.dumps({"id": f"clueweb22-en{i % args.partitions:04d}-00-{i:07d}:0",
                                             "contents": text}) + "\n")
            (work / "p.tmp").rename(collection)
        build_index([collection], work / "whole", threads=2)
        folder = work / f"parts-{args.partitions}"
        manifest = partition_index(collection, folder, "category", args.partitions, field="id",
                                   pattern=r"^clueweb22-(en\d+)", threads=2)
        searcher = PartitionedSearcher(folder)
        queries = {str(i): " ".join(rng.sample(sentence(rng).rstrip(".?!").split(), 4)) for i in range(args.queries)}
        for _ in range(2):  # warm up (JIT) both paths
            searcher.batch_search(queries, args.k), searcher.batch_search(queries, args.k, partitions=[0])
        whole_s, whole = timed(lambda: searcher.batch_search(queries, args.k))
        one_s, one = timed(lambda: searcher.batch_search(queries, args.k, partitions=[0]))
        half = list(range(max(1, args.partitions // 2)))
        half_s, _ = timed(lambda: searcher.batch_search(queries, args.k, partitions=half))
        same = whole == Bm25Searcher(work / "whole").batch_search(queries, args.k)
        report = {
            "passages": args.passages, "partitions": args.partitions, "queries": len(queries), "k": args.k,
            "threads": searcher.threads, "partition_sizes": [p["passages"] for p in manifest["parts"]],
            "all_partitions_q_per_s": round(len(queries) / whole_s, 1),
            f"{len(half)}_partitions_q_per_s": round(len(queries) / half_s, 1),
            "one_partition_q_per_s": round(len(queries) / one_s, 1),
            "ratio_one_vs_all": round(whole_s / one_s, 2),
            "all_partitions_equal_whole_index": same,
            "hits_one_partition": sum(map(len, one.values())), "hits_all": sum(map(len, whole.values())),
        }
        print(json.dumps(report, indent=2))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
