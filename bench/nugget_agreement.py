"""Agreement of the embedding nugget matcher with an LLM judge on a sample of iKAT 2024 (response, nugget) pairs.

The sample: the first ``--pairs`` pairs of (automatic run response, gold nugget) over conversations 5-8, run by run
in file order. An LLM label counts as support when it is support or partial_support. Prints raw agreement, Cohen's
kappa and both matchers' support rates. The LLM is served by a llama.cpp server on loopback (OpenAI backend) when
``llama-cpp-python`` is installed, else run through transformers.

    PYTHONPATH=src python bench/nugget_agreement.py [--model bundled:smollm2] [--pairs 60]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from contextlib import nullcontext
from importlib.util import find_spec
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared/ikat/2024-nuggets"))
    parser.add_argument("--model", default="bundled:smollm2")
    parser.add_argument("--pairs", type=int, default=60)
    args = parser.parse_args()
    from sklearn.metrics import cohen_kappa_score

    from ikatkit.evaluate.responses.data import read_nuggets, read_response_runs
    from ikatkit.evaluate.responses.nuggets import EmbeddingMatcher, LlmMatcher
    from ikatkit.llm import make_llm
    from ikatkit.llm.server import llama_cpp_server

    data = Path(args.data)
    nuggets = read_nuggets(data / "gold_nuggets_human.json")
    pairs = []
    for run in read_response_runs(data / "automatic_responses.json"):
        for turn, response in run.responses.items():
            if turn.split("_")[0] in {"5", "6", "7", "8"} and response.strip():
                pairs += [(response, n) for n in nuggets.get(turn, [])]
    pairs = pairs[: args.pairs]
    embedding = [s[0] for s in EmbeddingMatcher().support([r for r, _ in pairs], [[n] for _, n in pairs])]
    server = find_spec("llama_cpp") is not None
    with llama_cpp_server(args.model) if server else nullcontext() as url, tempfile.TemporaryDirectory() as cache:
        config = ({"backend": "openai", "model": args.model, "base_url": url} if server
                  else {"backend": "transformers", "model": args.model})
        os.environ.setdefault("OPENAI_API_KEY", "local")
        llm = make_llm({**config, "cache_dir": cache})
        judged = [s[0] for s in LlmMatcher(llm).support([r for r, _ in pairs], [[n] for _, n in pairs])]
        from ikatkit.llm.prompts import render

        shown = [render("nugget_support", query="(not given)", response=r, nugget=n.text) for r, n in pairs[:3]]
        for output in llm.chat(shown, max_new_tokens=8):  # the cache replays them: what the judge said
            print(f"LLM output: {output!r}")
    llm_binary = [float(v >= 0.5) for v in judged]
    agreement = sum(a == b for a, b in zip(embedding, llm_binary)) / len(pairs)
    kappa = cohen_kappa_score(embedding, llm_binary) if len(set(embedding + llm_binary)) > 1 else float("nan")
    print(f"{len(pairs)} pairs; LLM {config['backend']}:{args.model} (labels not understood: "
          f"{int(llm.stats['parse_fallbacks'])}); support rate embedding {sum(embedding) / len(pairs):.3f}, "
          f"LLM {sum(llm_binary) / len(pairs):.3f} (partial {sum(v == 0.5 for v in judged)}); "
          f"agreement {agreement:.3f}, Cohen's kappa {kappa:.3f}")


if __name__ == "__main__":
    main()
