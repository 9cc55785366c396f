"""Run every benchmark with settings sized for a 2-core machine; each prints its figures and its ratio
against an anchor measured in the same run. Pass a benchmark's name to run only that one.

    python bench/run_all.py [index|search|rerank|biencoder|llm|dense|responses|promise|partitions|interactive|viewer]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
BENCHMARKS = {
    "index": ["bench_index.py"],
    "search": ["bench_search.py", "--passages", "200000", "--queries", "200", "--repeats", "3"],
    "rerank": ["bench_rerank.py"],
    "biencoder": ["bench_biencoder.py"],
    "llm": ["bench_llm.py"],
    "dense": ["bench_dense.py", "--passages", "2000", "--vectors", "1000000"],
    "responses": ["bench_responses.py"],
    "promise": ["bench_promise.py"],
    "partitions": ["bench_partitions.py", "--passages", "2000000", "--partitions", "8"],
    "interactive": ["bench_interactive.py", "--conversations", "3", "--configs", "bm25", "bm25-ce", "bm25-ce-tiny"],
    "viewer": ["bench_viewer.py"],  # no anchor: sizes and times of the viewer (viewer.md)
}


def main() -> int:
    chosen = sys.argv[1:] or list(BENCHMARKS)
    failed = []
    for name in chosen:
        script, *args = BENCHMARKS[name]
        if not (HERE / script).exists():
            continue
        print(f"== {name}: {script} {' '.join(args)}", flush=True)
        if subprocess.run([sys.executable, str(HERE / script), *args]).returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
