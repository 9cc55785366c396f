"""Search over an index larger than the memory it may use: the same queries in a fresh process inside a cgroup
memory limit (its page cache counts against the limit, so the index's pages are read from disk again and again)
and without one, the index's pages dropped from the cache before each (posix_fadvise DONTNEED). Needs root and a
writable cgroup memory controller (v1 ``/sys/fs/cgroup/memory`` or v2 ``memory.max``); says so and exits otherwise.

    python bench/memory_limit.py /work/scale-indexes/r10000000/index 10000000 --limit-gb 2 [--queries 100]

Prints one JSON: per side, the first pass (cold) and a second pass over the same queries (q/s, k=1000), the peak
memory the cgroup charged, and the index size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import drop_cache  # noqa: E402
from realistic import Generator  # noqa: E402

V1 = Path("/sys/fs/cgroup/memory")
SCRIPT = """import json, sys, time
from ikatkit.retrieve.bm25 import Bm25Searcher
searcher = Bm25Searcher(sys.argv[1])
queries = json.loads(sys.argv[2])
passes = []
for _ in range(2):
    start = time.perf_counter()
    for query in queries:
        searcher.search(query, 1000)
    passes.append(len(queries) / (time.perf_counter() - start))
print(json.dumps(passes))
"""


def cgroup(limit: int) -> tuple[Path, str, str]:
    """A fresh memory cgroup limited to ``limit`` bytes: (folder, procs file, peak file)."""
    if V1.is_dir() and os.access(V1, os.W_OK):
        folder = V1 / f"ikatkit-bench-{os.getpid()}"
        folder.mkdir()
        (folder / "memory.limit_in_bytes").write_text(str(limit))
        return folder, "cgroup.procs", "memory.max_usage_in_bytes"
    unified = Path("/sys/fs/cgroup")
    if (unified / "cgroup.controllers").exists() and os.access(unified, os.W_OK):
        folder = unified / f"ikatkit-bench-{os.getpid()}"
        folder.mkdir()
        (folder / "memory.max").write_text(str(limit))
        return folder, "cgroup.procs", "memory.peak"
    sys.exit("memory_limit: no writable cgroup memory controller here (needs root): the case stays unmeasured")


def joiner(procs: Path) -> Callable[[], None]:
    """Run in the child before exec: move it into the cgroup of ``procs``."""
    return lambda: procs.write_text(str(os.getpid()))


def side(index: Path, queries: list[str], limit: int | None) -> dict[str, Any]:
    drop_cache(index)
    folder: Path | None = None
    procs = peak = ""
    if limit:
        folder, procs, peak = cgroup(limit)
    try:
        child = subprocess.Popen([sys.executable, "-c", SCRIPT, str(index), json.dumps(queries)],
                                 stdout=subprocess.PIPE, text=True,
                                 preexec_fn=joiner(folder / procs) if folder and procs else None)
        out, _ = child.communicate()
        if child.returncode:
            return {"exit": child.returncode, "note": "killed: the limit is below what the JVM and Python need"}
        cold, warm = json.loads(out.strip().splitlines()[-1])
        found: dict[str, Any] = {"cold_pass_q_per_s": round(cold, 2), "second_pass_q_per_s": round(warm, 2)}
        if folder:
            found["peak_charged_mib"] = round(int((folder / peak).read_text()) / 2**20)
        return found
    finally:
        if folder:
            folder.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("passages", type=int, help="the collection's size (its generator's queries)")
    parser.add_argument("--limit-gb", type=float, default=2.0)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    queries = Generator(args.passages).queries(args.queries)
    index_bytes = sum(f.stat().st_size for f in args.index.iterdir())
    report = {"index_gb": round(index_bytes / 1e9, 2), "queries": len(queries), "k": 1000,
              "limit_gb": args.limit_gb,
              "unlimited": side(args.index, queries, None),
              "limited": side(args.index, queries, int(args.limit_gb * 2**30))}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
