"""Top-k BM25 throughput of our searcher against Pyserini's LuceneSearcher.search on the same index and
queries, in the same run, checking that both return the same ids in the same order with the same scores;
then batch search on the searcher's threads against LuceneSearcher.batch_search with as many. Each side is timed
``--repeats`` times, alternating, and its fastest time kept. ``--anserini`` builds the synthetic index with Anserini's
IndexCollection alone (an index without ikatkit's manifest, opened read-only as the organizers' prebuilt one is).

    python bench/bench_search.py --passages 200000 --queries 200 [--repeats 3] [--anserini]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import sentence, timed  # noqa: E402

from ikatkit.index.anserini import run_anserini  # noqa: E402
from ikatkit.index.build import build_index  # noqa: E402
from ikatkit.retrieve.bm25 import Bm25Searcher  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=200000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--index", help="an existing index (else a synthetic one is built)")
    parser.add_argument("--anserini", action="store_true", help="build the synthetic index with Anserini alone")
    parser.add_argument("--repeats", type=int, default=1, help="time each side this many times, keep the fastest")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ikatkit-bench-search-"))
    try:
        rng = random.Random(1)
        index = Path(args.index) if args.index else work / "index"
        if not args.index:
            (work / "shards").mkdir()
            with open(work / "shards" / "p.jsonl", "w", encoding="utf-8") as handle:
                for i in range(args.passages):
                    text = " ".join(sentence(rng) for _ in range(rng.randint(5, 10)))
                    passage = {"id": f"clueweb22-en0000-00-{i:05d}:{i // 100000}", "contents": text}
                    handle.write(json.dumps(passage) + "\n")
            if args.anserini:
                run_anserini(work / "shards", index, 2, args.passages)
            else:
                build_index([work / "shards" / "p.jsonl"], index, threads=2)
        searcher = Bm25Searcher(index)
        queries = [" ".join(rng.sample(sentence(rng).rstrip(".").split(), 4)) for _ in range(args.queries)]
        report = {"passages": args.passages, "queries": len(queries), "foreign_index": searcher.info.manifest is None,
                  "repeats": args.repeats}
        for query in queries[:20]:  # warm both paths up (JIT) before timing
            searcher.pyserini.search(query, 1000), searcher.search(query, 1000)
        report["bulk_helper"] = searcher.bulk
        for k in (100, 1000):
            anchor, reference, ours, hits = best_of(args.repeats,
                                                    lambda: [searcher.pyserini.search(q, k) for q in queries],
                                                    lambda: [searcher.search(q, k) for q in queries])
            same = all([h.docid for h in a] == [pid for pid, _ in b] for a, b in zip(reference, hits))
            gap = max((abs(a.score - b[1]) for r, h in zip(reference, hits) for a, b in zip(r, h)), default=0.0)
            report[f"k={k}"] = {"lucene_searcher_q_per_s": round(len(queries) / anchor, 1),
                                "ikatkit_q_per_s": round(len(queries) / ours, 1),
                                "ratio_vs_lucene_searcher": round(anchor / ours, 2), "same_ids": same,
                                "max_score_difference": gap}
        batch = dict(enumerate(queries))
        anchor, reference, ours, hits = best_of(
            args.repeats,
            lambda: searcher.pyserini.batch_search(queries, [str(i) for i in batch], 1000, searcher.threads),
            lambda: searcher.batch_search(batch, 1000))
        same = all([h.docid for h in reference[str(i)]] == [pid for pid, _ in hits[i]] for i in batch)
        report[f"batch k=1000, {searcher.threads} threads"] = {
            "lucene_searcher_q_per_s": round(len(queries) / anchor, 1),
            "ikatkit_q_per_s": round(len(queries) / ours, 1),
            "ratio_vs_lucene_searcher": round(anchor / ours, 2), "same_ids": same}
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def best_of(repeats: int, anchor: Callable[[], Any], ours: Callable[[], Any]) -> tuple[float, Any, float, Any]:
    """Both sides timed ``repeats`` times, alternating: (fastest anchor, its result, fastest ours, its result)."""
    runs = [(timed(anchor), timed(ours)) for _ in range(repeats)]
    (a, reference), (o, found) = (min((r[side] for r in runs), key=lambda t: t[0]) for side in (0, 1))
    return a, reference, o, found


if __name__ == "__main__":
    main()
