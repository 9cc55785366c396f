"""``ikatkit persona-eval``: precision/recall of persona tracking against the PTKB statements users reveal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

# MiniLM cosine at which a user's words count as saying a statement: calibrated on the 2023 train topics
# (`ikatkit persona-eval --topics ../shared/ikat/2023/train_topics.json --calibrate`, docs/persona.md).
DEFAULT_THRESHOLD = 0.55


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("persona-eval", help="precision/recall of extracted user statements against the PTKB "
                                            "statements the users' utterances reveal")
    p.add_argument("--topics", required=True, nargs="+",
                   help="topics files (any year) or the organizers' 2025 simulation-data.csv; a table row each")
    llm = p.add_mutually_exclusive_group()
    llm.add_argument("--llm", help="also extract with this LLM (transformers backend, e.g. bundled:smollm2)")
    llm.add_argument("--llm-config",
                     help="... or with the LLM of this TOML or JSON file, as an llm resource: backend, model, "
                          "base_url ... (e.g. a llama.cpp server: bench/persona_llm.py)")
    p.add_argument("--llm-only", action="store_true", help="with --llm/--llm-config: no row for the rule extractor")
    p.add_argument("--threshold", type=float, default=None,
                   help=f"MiniLM cosine for a match (default {DEFAULT_THRESHOLD}, calibrated on the 2023 train topics)")
    p.add_argument("--calibrate", action="store_true",
                   help="choose the threshold on the first --topics file (its F1 per threshold printed), use it")
    p.add_argument("--limit", type=int, help="only the first N users (conversations) of each file")
    p.add_argument("--conversations", nargs="+", help="only these conversations (users) of each file")
    p.add_argument("--max-new-tokens", type=int, default=64, help="LLM output length (unless the config sets it)")
    p.add_argument("--cache", help="cache folder for LLM outputs and embeddings (default $IKATKIT_CACHE)")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from ikatkit.errors import IkatError
        from ikatkit.studies.persona import calibrate, evaluate, llm_extract, load_cases, rule_extract, table
        from ikatkit.paths import cache_root
        from ikatkit.rank import BiEncoder

        if args.threshold is not None and not 0 < args.threshold <= 1:
            raise IkatError(f"--threshold {args.threshold} is not in (0, 1]", where="--threshold",
                            fix="give a cosine such as 0.5")
        if args.limit is not None and args.limit < 1:
            raise IkatError(f"--limit {args.limit} is not positive", where="--limit", fix="give 1 or more")
        cache = Path(args.cache) if args.cache else cache_root()
        files = {path: [c for c in load_cases(path) if not args.conversations or c.id in args.conversations]
                 [: args.limit] for path in args.topics}
        encoder = BiEncoder("bundled:minilm", cache_dir=str(cache / "embeddings"))
        threshold = args.threshold if args.threshold is not None else DEFAULT_THRESHOLD
        if args.calibrate:
            threshold, f1 = calibrate(files[args.topics[0]], encoder.encode)
            sys.stdout.write("calibration (F1 of cosine >= t against the revealed rule, utterance x statement): "
                             + ", ".join(f"{t}: {v:.3f}" for t, v in f1.items()) + f"\nchosen: {threshold}\n\n")
        with_llm = bool(args.llm or args.llm_config)
        extractors: list[tuple[str, Callable[[list[str]], dict[str, list[str]]]]] = (
            [] if with_llm and args.llm_only else [("rule", rule_extract)])
        if with_llm:
            from ikatkit.llm import command_llm

            llm = command_llm(args.llm_config, args.llm, cache, max_new_tokens=args.max_new_tokens)
            extractors.append((f"llm {llm.model}", llm_extract(llm)))
        rows = [(Path(path).name, name, evaluate(cases, extract, encoder.encode, threshold))
                for path, cases in files.items() for name, extract in extractors]
        sys.stdout.write(table(rows, threshold))
        if with_llm:
            s = llm.stats
            sys.stdout.write(f"\nllm {llm.model}: {s['calls']:.0f} utterances ({s['hits']:.0f} from the "
                             f"cache), {s['parse_fallbacks']:.0f} outputs refused by the guard (rule used), "
                             f"{s['generate_seconds']:.0f} s generating\n")
        return 0

    p.set_defaults(func=run)
