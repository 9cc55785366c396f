"""``ikatkit interactive``: take part in the iKAT interactive task through the organizers' simulation API."""

from __future__ import annotations

import argparse

from ikatkit.runs.tokens import EDITIONS, interactive_rules


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "interactive", help="answer a simulated user through the iKAT simulation API with a pipeline config",
        description="Start (or resume) an interactive run: each user message is answered by the config's stages "
                    "on a one-turn record. The team token only from $IKAT_API_TOKEN. Rerun the same command after "
                    "a kill, a network failure or a server restart to continue the run; a complete run is "
                    "reported, not restarted. See docs/interactive.md.")
    p.add_argument("config", help="a run config, e.g. configs/demo.toml")
    p.add_argument("--api", required=True, help="the API's base URL, e.g. https://trec-ikat25.webis.de/simulation "
                                                "or http://127.0.0.1:8600 (ikatkit simulate)")
    p.add_argument("--run-id", required=True, help="the run's id at the server (unique per team)")
    p.add_argument("--index", help="Lucene index built by `ikatkit index build`")
    p.add_argument("--out", required=True, help="output folder: turns, state, manifest, <run_id>.jsonl, TREC run")
    p.add_argument("--debug", action="store_true", help="use /debug/* (not evaluated; its budget counts sessions)")
    p.add_argument("--description", help="the run's description (default: the config's description)")
    p.add_argument("--track-persona", action="store_true",
                   help="track what the user reveals about themselves (track_persona stage; sent as "
                        "extra.track_persona)")
    p.add_argument("--rules", type=int, choices=EDITIONS,
                   help="the edition whose limits apply (citations, response tokens) (default: 2026 when the "
                        "server's messages carry user_meta, else 2025)")
    p.add_argument("--citations", type=int,
                   help="citations per response: the ranking's top k, at most the rules' (default: the rules' "
                        + ", ".join(f"{e}: {interactive_rules(e).max_citations}" for e in EDITIONS) + ")")
    p.add_argument("--topics", help="topic JSON whose conversations' PTKB each turn gets, for a server whose "
                                    "messages carry no user_meta.ptkb (2025)")
    p.add_argument("--cache", help="cache folder: LLM outputs, embeddings, OpenVINO models, compiled Java helpers "
                                   "(default: $IKATKIT_CACHE, else .cache/ikatkit in a checkout, else "
                                   "~/.cache/ikatkit)")
    p.add_argument("--retries", type=int, default=4, help="retries with exponential backoff after a server error")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ikatkit.interactive.driver import run_interactive

    outcome = run_interactive(args.config, args.api, args.run_id, args.out, index=args.index, debug=args.debug,
                              description=args.description, track_persona=args.track_persona, cache_dir=args.cache,
                              k=args.citations, rules=args.rules, topics=args.topics, retries=args.retries)
    print(outcome.summary())
    return 0
