"""Segmentation + indexing throughput of `ikatkit index build` against Anserini's IndexCollection on the same
passages (pre-segmented JSONL, same shards and threads), measured in the same run; peak memory.

    python bench/bench_index.py --documents 20000
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import timed, write_clueweb22  # noqa: E402

from ikatkit.index.build import build_index, run_anserini, write_shards  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20000, help="synthetic documents (about 5 passages each)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ikatkit-bench-index-"))
    try:
        files = write_clueweb22(work / "raw", args.documents, files=args.threads * 2)
        # anchor: Anserini alone on the already segmented passages
        stats = write_shards(files, "clueweb22", work / "shards", args.threads, "rule")
        anchor, _ = timed(lambda: run_anserini(work / "shards", work / "anchor", args.threads))
        ours, manifest = timed(lambda: build_index(files, work / "ours", fmt="clueweb22", threads=args.threads,
                                                   splitter="rule"))
        passages = stats.passages
        assert manifest["counts"]["passages"] == passages
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        java = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(json.dumps({
            "documents": args.documents, "passages": passages, "threads": args.threads,
            "anchor_anserini_psg_per_s": round(passages / anchor), "ikatkit_psg_per_s": round(passages / ours),
            "ratio_vs_anserini": round(anchor / ours, 3),
            "peak_rss_mb": {"python": round(own), "java": round(java)}}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
