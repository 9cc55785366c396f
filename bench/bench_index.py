"""Segmentation + indexing throughput of `ikatkit index build` against Anserini's IndexCollection alone on the
same passages (pre-segmented JSONL, as many shards and threads), measured in the same run; peak memory.

    python bench/bench_index.py --documents 230000 --rounds 3    # about 1M passages (the default size)

Peak resident memory and CPU seconds are sampled from /proc for the Python parent, the segmenter
processes together and Java; run two sizes to see memory stay flat. With Anserini's threads on every core,
wall time is about CPU seconds over cores: ``cpu_s["other"]``, what other processes used meanwhile, tells
whether other work took some.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import ProcessTree, machine_busy_s, timed, write_clueweb22  # noqa: E402

from ikatkit.index.anserini import run_anserini  # noqa: E402
from ikatkit.index.build import build_index  # noqa: E402
from ikatkit.index.indexing import write_shards  # noqa: E402
from ikatkit.java import helper_classes  # noqa: E402


def measured(function):  # type: ignore[no-untyped-def]
    """Wall seconds, CPU seconds (ours per part, and the other processes'), peak memory of ``function()``."""
    busy = machine_busy_s()
    with ProcessTree() as tree:
        wall, _ = timed(function)
    cpu = {part: round(value, 1) for part, value in tree.cpu_s.items()}
    cpu["other"] = round(max(0.0, machine_busy_s() - busy - sum(tree.cpu_s.values())), 1)
    return {"wall_s": round(wall, 2), "cpu_s": cpu,
            "peak_rss_mib": {part: round(value) for part, value in tree.peak_rss_mib.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=230000, help="synthetic documents (4.35 passages each)")
    parser.add_argument("--threads", type=int, default=2, help="Anserini threads and shards")
    parser.add_argument("--files", type=int, default=8, help="input files the documents are spread over")
    parser.add_argument("--rounds", type=int, default=1, help="anchor-then-ours rounds; the ratio is their median's")
    parser.add_argument("--segmenter", default="auto", choices=["auto", "java", "python"],
                        help="ikatkit's segmenter: in Anserini's threads (java) or in processes feeding them (python)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ikatkit-bench-index-"))
    try:
        files = write_clueweb22(work / "raw", args.documents, files=args.files)
        stats = write_shards(files, "clueweb22", work / "shards", args.threads, "rule")
        helper_classes()  # our Java collection compiled once per install, before the clock starts
        rounds = []
        for _ in range(args.rounds):
            anchor = measured(lambda: run_anserini(work / "shards", work / "anchor", args.threads, stats.passages))
            ours = measured(lambda: build_index(files, work / "ours", fmt="clueweb22", threads=args.threads,
                                                splitter="rule", segmenter=args.segmenter))
            manifest = json.loads((work / "ours" / "manifest.json").read_text())
            assert manifest["counts"]["passages"] == stats.passages
            rounds.append({"anchor": anchor, "ikatkit": ours})
            shutil.rmtree(work / "anchor")
            shutil.rmtree(work / "ours")
        anchor_s = statistics.median(r["anchor"]["wall_s"] for r in rounds)
        ours_s = statistics.median(r["ikatkit"]["wall_s"] for r in rounds)
        print(json.dumps({
            "documents": args.documents, "passages": stats.passages, "threads": args.threads, "files": args.files,
            "segmenter": manifest["parameters"]["segmenter"],
            "anchor_anserini_psg_per_s": round(stats.passages / anchor_s),
            "ikatkit_psg_per_s": round(stats.passages / ours_s),
            "ratio_vs_anserini": round(anchor_s / ours_s, 3), "rounds": rounds}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
