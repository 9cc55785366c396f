"""The LLM persona extractor measured through a llama.cpp server: starts one for the bundled SmolLM2 GGUF on
127.0.0.1 (``ikatkit.llm.server.llama_cpp_server``), runs ``ikatkit persona-eval --llm-config`` against it (the
``openai`` backend) and prints wall and CPU seconds (this process and the server); ``--examples FILE`` also writes
each utterance's LLM output, the statements the guard kept and its reason to refuse (JSON lines, from the cache).

    python bench/persona_llm.py [--threads 1] [--port 8711] [--examples out.jsonl] -- PERSONA-EVAL OPTIONS

e.g. ``python bench/persona_llm.py -- --topics ../shared/ikat/2023/train_topics.json``. The port is part of the
LLM cache key (the server's URL), so a fixed port lets a killed run resume from the cache.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import say_llm_cpu  # noqa: E402


def write_examples(path: Path, topics: list[str], config: dict, conversations: list[str] | None,
                   limit: int | None) -> None:
    """Each utterance's LLM output (served from the cache the evaluation filled), kept statements and refusal,
    over the users persona-eval evaluated."""
    from ikatkit.studies.persona import load_cases
    from ikatkit.llm import make_llm
    from ikatkit.llm.prompts import STOPS, render
    from ikatkit.stages.persona import check_statements, self_statements

    llm = make_llm(config)
    with open(path, "w", encoding="utf-8") as out:
        for topics_file in topics:
            cases = [c for c in load_cases(topics_file) if not conversations or c.id in conversations][:limit]
            for case in cases:
                for utterance in case.utterances:
                    output = llm.chat([render("persona_statements", utterance=utterance)],
                                      stop=STOPS["persona_statements"])[0]
                    kept, problem = check_statements(output, utterance)
                    out.write(json.dumps({"topics": Path(topics_file).name, "user": case.id, "utterance": utterance,
                                          "output": output, "kept": kept, "refused": problem,
                                          "rule": self_statements(utterance)}) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    parser.add_argument("--port", type=int, default=8711, help="the server's port on 127.0.0.1 (default 8711)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--examples", type=Path, help="write each utterance's output and verdict here (JSONL)")
    parser.add_argument("persona_eval", nargs=argparse.REMAINDER, help="-- then persona-eval's options")
    args = parser.parse_args()
    rest = args.persona_eval[1:] if args.persona_eval[:1] == ["--"] else args.persona_eval

    from ikatkit.cli import build_parser, main as cli
    from ikatkit.llm.server import llama_cpp_server

    evaluated = build_parser().parse_args(["persona-eval", *rest])
    start, code = time.perf_counter(), 0
    with llama_cpp_server("bundled:smollm2", port=args.port, n_threads=args.threads) as url:
        config = {"backend": "openai", "model": "smollm2", "base_url": url, "max_concurrency": 1,
                  "max_new_tokens": args.max_new_tokens, "timeout": 600.0}
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "llm.json"
            path.write_text(json.dumps(config), encoding="utf-8")
            code = cli(["persona-eval", "--llm-config", str(path), "--llm-only", *rest])
        if args.examples and code == 0:
            from ikatkit.paths import cache_root

            cache = Path(evaluated.cache) if evaluated.cache else cache_root()
            write_examples(args.examples, evaluated.topics, {**config, "cache_dir": str(cache / "llm")},
                           evaluated.conversations, evaluated.limit)
    say_llm_cpu(start, args.threads)
    return code


if __name__ == "__main__":
    sys.exit(main())
