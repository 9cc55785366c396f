"""``ikatkit robustness`` of a config whose ``[resources.llm]`` is the bundled SmolLM2, served by llama.cpp: starts a
llama.cpp server for the bundled GGUF on 127.0.0.1 (``ikatkit.llm.server.llama_cpp_server``), runs the robustness
report with the config's LLM pointed at it (the ``openai`` backend) and prints wall and CPU seconds (this process and
the server). On this 2-core machine the transformers backend took minutes a turn under load; llama.cpp serves the
same model's rewrites in about a second (docs/robustness.md).

    python bench/robustness_llm.py CONFIG [--threads 1] [--port 8712] -- ROBUSTNESS OPTIONS

e.g. ``python bench/robustness_llm.py configs/robustness_rewrite_bm25.toml -- --topics
../shared/ikat/2023/test_topics.json --qrels ../shared/ikat/2023/qrels.txt --profiles clean typos terse
--index indexes/ikat23 --out runs/robustness/rewrite_bm25``. The port is part of the LLM cache key and the runs'
fingerprint (the server's URL), so a fixed port lets a stopped run resume.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import say_llm_cpu  # noqa: E402

LLM_TABLE = re.compile(r"^\[resources\.llm\]\n(?:(?!\[).*\n?)*", re.MULTILINE)


def served(config: str, url: str, max_new_tokens: int) -> str:
    """The config's text with its ``[resources.llm]`` table replaced by the llama.cpp server at ``url``."""
    table = (f'[resources.llm]\nkind = "llm"\nbackend = "openai"\nmodel = "smollm2"\nbase_url = "{url}"\n'
             f"max_concurrency = 1\nmax_new_tokens = {max_new_tokens}\ntimeout = 600.0\n\n")
    if not LLM_TABLE.search(config):
        sys.exit("robustness_llm: the config has no [resources.llm] table to serve")
    return LLM_TABLE.sub(table, config, count=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help="a run config with a [resources.llm] table")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    parser.add_argument("--port", type=int, default=8712, help="the server's port on 127.0.0.1 (default 8712)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: robustness's options
    args, rest = parser.parse_args(argv[:cut]), argv[cut + 1:]

    from ikatkit.cli import build_parser, main as cli
    from ikatkit.llm.server import llama_cpp_server

    out = Path(build_parser().parse_args(["robustness", str(args.config), *rest]).out)
    start = time.perf_counter()
    with llama_cpp_server("bundled:smollm2", port=args.port, n_threads=args.threads) as url:
        out.mkdir(parents=True, exist_ok=True)
        config = out / f"{args.config.stem}.llamacpp.toml"  # beside the report: its manifest names this file
        config.write_text(served(args.config.read_text(encoding="utf-8"), url, args.max_new_tokens),
                          encoding="utf-8")
        code = cli(["robustness", str(config), *rest])
    say_llm_cpu(start, args.threads)
    return code


if __name__ == "__main__":
    sys.exit(main())
