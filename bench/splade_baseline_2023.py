"""configs/splade_rr_baseline.toml over all 332 turns of the 2023 test topics, validated (issue 60).

The shipped config with what loads on these machines substituted, as tests/test_splade.py does on one conversation:
the SPLADE index of the 894 real passages that ``bench/splade_real_passages.py`` builds with a random-weight model of
SPLADE++'s shape (run it first with the same ``--work``), a cross-encoder made from the bundled MiniLM with an
untrained head (seeded), the bundled SmolLM2 GGUF for Llama 3.1, served by llama.cpp's server on loopback through
the ``openai`` backend (the served path of configs/rtg_served.toml) with ``--tokens`` new tokens, and the re-ranking's
``depth`` set to ``--depth`` (the shipped config re-ranks all 1,000: a MiniLM cross-encoder scores about 10 pairs a
second on these 2 cores, 332,000 pairs would take most of a day; on a GPU it is 1,000 pairs in a fraction of a
second). Everything else (SPLADE top 1,000 written to the run, an answer from the top 3 passages and the gold PTKB)
is the config as shipped.
The weights are random, so the rankings and answers mean nothing: this shows the baseline's plumbing over a whole
year, not its quality. Usage:

    python bench/splade_baseline_2023.py [--data ../shared/ikat] [--work /tmp/splade-894] [--tokens 32]
        [--depth 20] [--port 38111] [--threads 1]

Prints one JSON line: turns, seconds, the run's validation verdict.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUBSTITUTIONS = (('backend = "transformers"\nmodel = "meta-llama/Llama-3.1-8B-Instruct"\nmax_new_tokens = 256\n'
                  'device = "cuda"  # an 8B LLM: on a GPU (ikatkit configs lists it; refused on a CPU before anything '
                  'loads)',
                  'backend = "openai"\nbase_url = "{url}"\nmodel = "smollm2"\nmax_new_tokens = {tokens}'),
                 ('model = "cross-encoder/ms-marco-MiniLM-L-12-v2"', 'model = "{cross_encoder}"'),
                 ('path = "indexes/ikat23-splade"\nmodel = "naver/splade-cocondenser-ensembledistil"',
                  'path = "{index}"'),
                 ('stage = "rerank"\nranker = "reranker"', 'stage = "rerank"\nranker = "reranker"\ndepth = {depth}'))


def ikatkit(*args: str) -> str:
    """One ``ikatkit`` command, its output echoed; fails with its exit code."""
    done = subprocess.run([sys.executable, "-m", "ikatkit.cli", *args], capture_output=True, text=True)
    sys.stderr.write(done.stderr[-4000:])
    if done.returncode:
        sys.exit(f"ikatkit {args[0]} failed ({done.returncode}): {done.stdout[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "ikat")
    parser.add_argument("--work", type=Path, default=Path("/tmp/splade-894"))
    parser.add_argument("--tokens", type=int, default=32, help="new tokens a turn (SmolLM2 on the CPU)")
    parser.add_argument("--depth", type=int, default=20, help="candidates re-ranked a turn (shipped: all)")
    parser.add_argument("--conversations", nargs="*", help="only these (default: all 25)")
    parser.add_argument("--port", type=int, default=38111, help="llama.cpp server's port on 127.0.0.1")
    parser.add_argument("--threads", type=int, default=1,
                        help="llama.cpp server's threads (1 beside other work: more spin against it)")
    args = parser.parse_args()
    index, passages = args.work / "index", args.work / "passages.jsonl"
    if not (index / "manifest.json").exists():
        sys.exit(f"no SPLADE index at {index}: run python bench/splade_real_passages.py --work {args.work} first")
    import torch
    from sentence_transformers import CrossEncoder

    from ikatkit.llm.server import llama_cpp_server
    from ikatkit.models import resolve_model

    bm25 = args.work / "bm25"
    if not (bm25 / "manifest.json").exists():
        ikatkit("index", "build", str(passages), "--out", str(bm25))
    cross_encoder = args.work / "cross-encoder"
    if not (cross_encoder / "config.json").exists():
        torch.manual_seed(0)
        CrossEncoder(resolve_model("bundled:minilm"), num_labels=1).save(str(cross_encoder))
    text = (ROOT / "configs" / "splade_rr_baseline.toml").read_text(encoding="utf-8")
    for shipped, here in SUBSTITUTIONS:
        if shipped not in text:
            sys.exit(f"configs/splade_rr_baseline.toml no longer has {shipped!r}: update this script")
        text = text.replace(shipped, here.format(tokens=args.tokens, cross_encoder=cross_encoder, index=index,
                                                 depth=args.depth, url="{url}"))
    topics = args.data / "2023" / "test_topics.json"
    chosen = ["--conversations", *args.conversations] if args.conversations else []
    # a fixed port: the URL is in the config, so a rerun resumes the run
    with llama_cpp_server("bundled:smollm2", port=args.port, n_ctx=4096, n_threads=args.threads) as url:
        config = args.work / "splade_rr_baseline.toml"
        config.write_text(text.replace("{url}", url), encoding="utf-8")
        began = time.perf_counter()
        output = ikatkit("run", str(config), "--topics", str(topics), "--index", str(bm25), "--out",
                         str(args.work / "run"), "--cache", str(args.work / "cache"), *chosen)
        seconds = time.perf_counter() - began
    turns = sum(len(c["turns"]) for c in json.loads(topics.read_text(encoding="utf-8"))
                if not args.conversations or c["number"] in args.conversations)
    print(output.strip())
    print(json.dumps({"turns": turns, "seconds": round(seconds, 1), "tokens": args.tokens, "depth": args.depth,
                      "output_tail": output.strip().splitlines()[-1:]}))


if __name__ == "__main__":
    main()
