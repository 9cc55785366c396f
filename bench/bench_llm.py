"""LLM throughput here: the bundled SmolLM2 through transformers (the anchor) and through a llama.cpp server
(OpenAI backend), each on the same RtG rewrite prompts, then a rerun of each served from the disk cache.

    python bench/bench_llm.py [--prompts 8] [--max-new-tokens 32] [--native DIR]

``--native DIR``: also serve through a second llama.cpp build in DIR (made with
``CMAKE_ARGS=-DGGML_NATIVE=ON pip install --no-deps --target DIR llama-cpp-python==0.3.36``) and report the portable
build's tokens/s against it (docs/install.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import timed  # noqa: E402

UTTERANCES = ["What about its price?", "Is it good for runners?", "Which one is closer to me?",
              "How long does it take?",
              "Can I do it in winter?", "What do I need to bring?", "Is it safe for kids?", "And the cheaper one?"]


def measure(config: dict[str, Any], batch: list[list[dict[str, str]]]) -> dict[str, Any]:
    """Tokens/s of a cold run and the cache speed-up of an identical rerun with a fresh LLM object."""
    from ikatkit.llm import make_llm

    llm = make_llm(config)
    cold, outputs = timed(lambda: llm.chat(batch))
    rerun = make_llm(config)
    warm, again = timed(lambda: rerun.chat(batch))
    assert again == outputs and rerun.stats["hits"] == len(batch)
    tokens = llm.stats["completion_tokens"]
    return {"completion_tokens": tokens, "prompt_tokens": llm.stats["prompt_tokens"], "seconds": round(cold, 2),
            "tokens_per_s": round(tokens / cold, 1), "cached_rerun_seconds": round(warm, 4),
            "cache_speedup": round(cold / warm, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--native", help="a folder with a natively built llama-cpp-python (pip install --target)")
    args = parser.parse_args()
    from ikatkit.llm.prompts import render
    from ikatkit.llm.server import llama_cpp_server

    history = [("I want to plan a hiking trip in Japan.", "The Kumano Kodo trail would suit you.")]
    batch = [render("rtg_rewrite", history=history, utterance=UTTERANCES[i % len(UTTERANCES)] + " " * (i // 8))
             for i in range(args.prompts)]
    results: dict[str, Any] = {"prompts": len(batch), "max_new_tokens": args.max_new_tokens}
    with tempfile.TemporaryDirectory() as cache:
        common = {"model": "bundled:smollm2", "max_new_tokens": args.max_new_tokens}
        results["transformers"] = measure({"backend": "transformers", "cache_dir": f"{cache}/hf", **common}, batch)
        with llama_cpp_server("bundled:smollm2") as url:
            results["openai_llama_cpp"] = measure({"backend": "openai", "base_url": url, "max_concurrency": 1,
                                                   "cache_dir": f"{cache}/openai", **common}, batch)
        if args.native:  # the server process imports llama_cpp from DIR first
            os.environ["PYTHONPATH"] = os.pathsep.join([args.native, *filter(None, [os.environ.get("PYTHONPATH")])])
            with llama_cpp_server("bundled:smollm2") as url:
                results["openai_llama_cpp_native"] = measure({"backend": "openai", "base_url": url,
                                                              "max_concurrency": 1, "cache_dir": f"{cache}/native",
                                                              **common}, batch)
            results["portable_vs_native_tokens_per_s"] = round(
                results["openai_llama_cpp"]["tokens_per_s"] / results["openai_llama_cpp_native"]["tokens_per_s"], 2)
    results["llama_cpp_vs_transformers_tokens_per_s"] = round(
        results["openai_llama_cpp"]["tokens_per_s"] / results["transformers"]["tokens_per_s"], 2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
