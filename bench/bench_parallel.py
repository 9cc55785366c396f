"""One query searched alone on 1 and on N threads (issue 53): ``Bm25Searcher``'s single-thread path against its
``ParallelSearch`` (doc-id ranges of the segments scored on a pool), k=1000, the realistic queries of
``bench/realistic.py``, on each index as built and on a copy merged into one segment (``IndexWriter.forceMerge(1)``,
made once beside it). Per query the fastest of ``--repeats`` rounds, the sides alternating query by query
(``common.interleaved``); the rankings of both sides compared hit by hit. Prints one JSON with the machine's load
average before and after: the speed-up only means what it says on an otherwise quiet machine; the CPU seconds each
side used (all its threads: the work, which load does not change much) say what the parts cost beyond one thread.

    python bench/bench_parallel.py --passages 200000 2000000 [--root /work/scale-indexes] [--queries 200]
        [--threads 2] [--repeats 3] [--no-merged] [--out parallel.json]

The indexes are ``ROOT/rN/index`` as ``bench/bench_scale.py`` builds them (``--skip search cold commands anserini``
builds them alone); the merged copy is ``ROOT/rN/index-merged``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import interleaved, machine_busy_s, print_json  # noqa: E402
from realistic import Generator  # noqa: E402


def link_or_copy(source: str, target: str) -> None:
    """A hard link of ``source`` at ``target``; a copy where the file system has none."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def merged_copy(index: Path, out: Path) -> Path:
    """``out``: a copy of the Lucene ``index`` merged into one segment (made once; a half-made one is redone). The
    copy hard-links the files (Lucene writes a file once and never changes it; the merge writes new files and unlinks
    the copy's names only), so it needs the disk of the merged segment alone: 19 GB at 10M, not 38."""
    from ikatkit.java import autoclass

    if (out / "merged.done").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(index, out, ignore=shutil.ignore_patterns("write.lock"), copy_function=link_or_copy)
    directory = autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.io.File")(str(out)).toPath())
    config = autoclass("org.apache.lucene.index.IndexWriterConfig")()
    config.setOpenMode(autoclass("org.apache.lucene.index.IndexWriterConfig$OpenMode").APPEND)
    writer = autoclass("org.apache.lucene.index.IndexWriter")(directory, config)
    try:
        writer.forceMerge(1)
    finally:
        writer.close()
        directory.close()
    (out / "merged.done").write_text("forceMerge(1)\n")
    return out


def compare(index: Path, queries: list[str], k: int, threads: int, repeats: int, part_docs: int) -> dict[str, Any]:
    """q/s of one query at a time on one thread and in parts on ``threads``; the same rankings or not."""
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.retrieve.lucene import SPARE, hits

    searcher = Bm25Searcher(index, threads=threads, parallel_from=0)
    parallel = searcher.lucene.parallel_search(part_docs)

    def parse(query: str) -> Any:
        return searcher.generator.buildQuery("contents", searcher.analyzer, query)

    sides = {"1_thread": lambda q: hits(searcher.lucene.top_hits.search(searcher.lucene.searcher, parse(q), k, SPARE,
                                                                 searcher.lucene.sort, "id")),
             f"{threads}_threads": lambda q: hits(parallel.search(parse(q), k, SPARE, searcher.lucene.sort, "id"))}
    for query in queries[:20]:  # JIT warm-up, both paths
        for side in sides.values():
            side(query)
    cpu = dict.fromkeys(sides, 0.0)  # the process's CPU seconds (every thread) per side: its work, load or not

    def charged(name: str) -> Any:
        def run(query: str) -> Any:
            start = time.process_time()
            try:
                return sides[name](query)
            finally:
                cpu[name] += time.process_time() - start
        return run

    busy, start = machine_busy_s(), time.perf_counter()
    best, kept = interleaved(queries, {name: charged(name) for name in sides}, repeats, keep=set(sides))
    machine = (machine_busy_s() - busy) / (time.perf_counter() - start)
    one, many = (kept[name] for name in sides)
    leaves = searcher.lucene.searcher.getIndexReader().leaves()
    found = {"segments": leaves.size(), "documents": searcher.lucene.searcher.getIndexReader().maxDoc(),
             "parts": parallel.parts(), "queries": len(queries), "k": k,
             **{f"{name}_q_per_s": round(len(queries) / seconds, 1) for name, seconds in best.items()},
             **{f"{name}_ms_per_query": round(1000 * seconds / len(queries), 2) for name, seconds in best.items()},
             "speedup": round(best["1_thread"] / best[f"{threads}_threads"], 3),
             "cpu_s": {name: round(seconds, 2) for name, seconds in cpu.items()},
             "cpu_ratio": round(cpu[f"{threads}_threads"] / cpu["1_thread"], 3),
             "same_rankings": sum(a == b for a, b in zip(one, many)), "hits": sum(map(len, one)),
             "machine_cores_busy": round(machine, 2)}
    parallel.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, nargs="+", default=[200000, 2000000])
    parser.add_argument("--root", type=Path, default=Path("/work/scale-indexes"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--part-docs", type=int, default=0, help="documents a part (0: four parts a thread)")
    parser.add_argument("--no-merged", action="store_true", help="leave out the one-segment copies")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    report: dict[str, Any] = {"load_average_start": os.getloadavg(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                              "cores": os.cpu_count(), "sizes": {}}
    for n in sorted(args.passages):
        index = args.root / f"r{n}" / "index"
        if not (index / "manifest.json").exists():
            sys.exit(f"bench_parallel: no index at {index}: build it first with python bench/bench_scale.py "
                     f"--passages {n} --skip search cold commands anserini --root {args.root}")
        queries = Generator(n).queries(args.queries)
        found = {"as_built": compare(index, queries, args.k, args.threads, args.repeats, args.part_docs)}
        print(json.dumps({n: found}), file=sys.stderr, flush=True)
        if not args.no_merged:
            start = time.perf_counter()
            merged = merged_copy(index, index.with_name("index-merged"))
            found["merge_s"] = round(time.perf_counter() - start, 1)
            found["merged"] = compare(merged, queries, args.k, args.threads, args.repeats, args.part_docs)
        report["sizes"][n] = found
        print(json.dumps({n: found}), file=sys.stderr, flush=True)
    report["load_average_end"] = os.getloadavg()
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    print_json(report, args.out)


if __name__ == "__main__":
    main()
