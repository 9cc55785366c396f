"""Turns per minute of RtG with ProMiSe refinement against the same RtG without it (the anchor), both on the bundled
SmolLM2 over real 2023 test turns and the 894 provenance passages, each with a fresh LLM cache, in the same run.

    python bench/bench_promise.py [--turns 4] [--n 3] [--iterations 2] [--max-new-tokens 48]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import provenance_jsonl, timed  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "ikat" / "2023"
STAGES = """name = "{name}"
batch_size = {turns}

[resources.llm]
kind = "llm"
backend = "transformers"
model = "bundled:smollm2"
max_new_tokens = {tokens}

[resources.bm25]
kind = "bm25"

[[stages]]
stage = "raw_query"

[[stages]]
stage = "retrieve"
k = 100
expand_ptkb = false

[[stages]]
stage = "respond"
task = "rtg_response"
passages = 3
"""
REFINE = """
[[stages]]
stage = "refine_response"
n = {n}
iterations = {iterations}
seed = 13
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()
    from ikatkit.index.build import build_index
    from ikatkit.pipelines import run_pipeline

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        build_index([provenance_jsonl(DATA, work / "passages.jsonl")], work / "index", threads=2)
        conversation = json.loads((DATA / "test_topics.json").read_text(encoding="utf-8"))[0]
        conversation["turns"] = conversation["turns"][: args.turns]
        (work / "topics.json").write_text(json.dumps([conversation]), encoding="utf-8")
        results = {"turns": args.turns, "n": args.n, "iterations": args.iterations,
                   "max_new_tokens": args.max_new_tokens}
        for name, body in (("plain", STAGES), ("promise", STAGES + REFINE)):
            (work / f"{name}.toml").write_text(body.format(name=name, turns=args.turns, tokens=args.max_new_tokens,
                                                           n=args.n, iterations=args.iterations), encoding="utf-8")
            seconds, outcome = timed(lambda: run_pipeline(work / f"{name}.toml", work / "topics.json", work / name,
                                                          index=work / "index", cache_dir=work / f"cache-{name}"))
            manifest = json.loads(outcome.manifest_file.read_text(encoding="utf-8"))
            results[name] = {"seconds": round(seconds, 1), "turns_per_min": round(60 * args.turns / seconds, 2),
                             "seconds_per_stage": manifest["seconds_per_stage"]}
            if manifest.get("refinement"):
                results[name]["refinement"] = manifest["refinement"]
        results["promise_vs_plain_turns_per_min"] = round(
            results["promise"]["turns_per_min"] / results["plain"]["turns_per_min"], 3)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
