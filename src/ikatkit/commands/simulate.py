"""``ikatkit simulate``: serve the simulation API locally (replayed or LLM users) for development."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ikatkit.simulate.profiles import CLEAN, PARTS

if TYPE_CHECKING:
    from ikatkit.simulate.server import Simulator


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate", help="serve the iKAT simulation API on 127.0.0.1 with replayed or LLM users (development)",
        description="A local stand-in for the organizers' simulation API: the same endpoints, messages, status "
                    "codes, budgets and 250-token rule. The team's token is $IKAT_API_TOKEN (or --token).")
    p.add_argument("--topics", required=True, help="topics file (any year): one session per conversation, in order")
    p.add_argument("--year", type=int, help="topic format year (detected when omitted)")
    p.add_argument("--conversations", nargs="+", help="only these conversations, in this order")
    p.add_argument("--users", choices=["replay", "llm"], default="replay",
                   help="replay: the recorded utterances, then goodbye; llm: a persona asks its questions")
    p.add_argument("--port", type=int, default=8600, help="port on 127.0.0.1 (default 8600)")
    p.add_argument("--token", help="the token clients must send (default $IKAT_API_TOKEN)")
    p.add_argument("--team", default="local-team", help="the team id the token stands for")
    p.add_argument("--store", help="JSON file keeping runs and requests across restarts (default: memory only)")
    p.add_argument("--runs", type=int, default=100, help="run budget (runs)")
    p.add_argument("--sessions", type=int, default=100, help="debug budget (sessions)")
    p.add_argument("--persona-data",
                   help="llm users: folder of simulation-data.csv (default $IKAT_DATA/2025-simulation, else "
                        "../shared/ikat/2025-simulation; topics without a persona there use their PTKB)")
    p.add_argument("--llm", default="bundled:smollm2", help="llm users: the model (ikatkit LLM layer)")
    p.add_argument("--llm-backend", choices=["transformers", "openai"], default="transformers")
    p.add_argument("--llm-config", help="llm users: TOML or JSON of the LLM (backend, model, base_url ...; "
                                        "instead of --llm and --llm-backend), as eval-responses reads it")
    p.add_argument("--max-turns", type=int, default=10, help="llm users: turns after which they leave")
    p.add_argument("--profile", default=CLEAN,
                   help="the users' behaviour: 'clean' or parts of " + ", ".join(PARTS) + " joined by '+' (e.g. "
                        "typos+impatient); replay users apply it to the system's answers, llm users get it in their "
                        "prompt; each user turn's profile is in the dump's user_meta (docs/robustness.md)")
    p.add_argument("--seed", type=int, default=0, help="the profile's seed (default 0)")
    p.add_argument("--user-types", nargs="+", metavar="NAME=PROFILE",
                   help="rehearse 2026: several simulated users per topic, one per type (e.g. u1=clean u2=typos "
                        "u3=terse+impatient u4=cooperative; profiles as --profile); each type is one user id across "
                        "topics; every type plays every topic unless --allocation says otherwise")
    p.add_argument("--allocation", help="with --user-types: JSON or TOML mapping each type to the conversations it "
                                        'plays (a list of ids, a count n = the first n, or "all"; docs/interactive.md)')
    p.add_argument("--rules", type=int, choices=[2025, 2026],
                   help="the server's edition: 2026 sends user_meta.ptkb with every message, answers /run/status with "
                        "user-topic pairs, takes at most 10 citations and keeps open sessions in --store; default "
                        "2026 with --user-types, else 2025")
    p.add_argument("--rubrics", help="llm users: the rubric questions they pursue per conversation (rubrics.json or "
                                     "rubrics.csv) instead of the persona's questions")
    p.add_argument("--user-map", help="write the simulated users' id -> type map here (JSON), for eval --user-types")
    p.set_defaults(func=run, on_stop=_stop_line)


def check_port(port: int) -> None:
    """One error when 127.0.0.1:``port`` cannot be served (in use), before anything loads: bound as uvicorn binds it
    (SO_REUSEADDR), then let go."""
    import socket

    from ikatkit.errors import IkatError

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as err:
            raise IkatError(f"cannot serve on 127.0.0.1:{port}: {err.strerror}", where="--port",
                            fix=f"pass another --port, or stop what listens there (`ss -ltnp 'sport = :{port}'` "
                                "names it; an earlier `ikatkit simulate`?)") from None


def run(args: argparse.Namespace) -> int:
    check_port(args.port)
    import uvicorn

    from ikatkit.errors import IkatError
    from ikatkit.simulate.server import create_app

    token = args.token or os.environ.get("IKAT_API_TOKEN")
    if not token:
        raise IkatError("no token for the simulator", fix="export IKAT_API_TOKEN=<any secret> (or pass --token)")
    if args.allocation and not args.user_types:
        raise IkatError("--allocation needs --user-types",
                        fix="name the types it allocates, e.g. --user-types u1=clean u2=typos")
    sim = simulator(args, token)
    kinds = sorted(set(sim.user_types.values()))
    print(f"simulating {len(sim.plan)} sessions over {len(sim.topics)} topics ({args.users} users, "
          + (f"user types {', '.join(kinds)}" if kinds else f"profile {args.profile}") + f", seed {args.seed}, "
          f"{sim.edition} rules) on http://127.0.0.1:{args.port}", flush=True)
    # uvicorn.Server, not uvicorn.run, which swallows the stop that uvicorn re-raises once it has shut down
    uvicorn.Server(uvicorn.Config(create_app(sim), host="127.0.0.1", port=args.port, log_level="warning")).run()
    return 0


def simulator(args: argparse.Namespace, token: str) -> Simulator:
    """The simulator the options describe (users, edition, PTKBs, user types), before it serves."""
    from ikatkit.atomic import write_json
    from ikatkit.simulate.plan import parse_user_types, play_order, read_allocation
    from ikatkit.simulate.profiles import parse_profile
    from ikatkit.simulate.server import Simulator
    from ikatkit.simulate.users import llm_users, load_personas, replay_users, typed_users
    from ikatkit.topics import load_topics

    profile = parse_profile(args.profile, args.seed)
    topics = load_topics(args.topics, args.year)
    if args.conversations:
        topics = topics.subset(args.conversations)
    edition = args.rules or (2026 if args.user_types else 2025)
    llm, personas, rubrics = None, {}, None
    if args.users == "llm":
        from ikatkit.llm import make_llm, read_llm_config

        folder = Path(args.persona_data or os.environ.get("IKAT_DATA", "../shared/ikat") + "/2025-simulation")
        personas = load_personas(folder) if folder.is_dir() else {}
        config = (read_llm_config(args.llm_config) if args.llm_config
                  else {"backend": args.llm_backend, "model": args.llm})
        llm = make_llm({"max_new_tokens": 48, **config})
        if args.rubrics:
            from ikatkit.evaluate.responses.rubrics import read_rubrics

            rubrics = {topic: [r.question for r in items] for topic, items in read_rubrics(args.rubrics).items()}
    user_types: dict[str, str] = {}
    if args.user_types:
        types = parse_user_types(args.user_types, args.seed)
        conversations = [c.id for c in topics.conversations]
        allocation = read_allocation(args.allocation, types, conversations) if args.allocation else None
        users: Any = typed_users(topics, play_order(types, conversations, allocation), llm=llm, personas=personas,
                                 rubrics=rubrics, max_turns=args.max_turns)
        user_types = {t.id: t.name for t in types}
    elif llm is None:
        users = replay_users(topics, profile)
    else:
        users = llm_users(topics, personas, llm, args.max_turns, profile, rubrics)
    if args.user_map:
        plays = users.values() if isinstance(users, dict) else (user for _, user in users)
        write_json(args.user_map, user_types or {user.id: profile.name for user in plays})
    ptkb = {c.id: list(c.ptkb.values()) for c in topics.conversations}
    return Simulator(users, {token: args.team}, store=args.store, run_limit=args.runs, session_limit=args.sessions,
                     ptkb=ptkb, edition=edition, user_types=user_types)


def _stop_line(args: argparse.Namespace, again: str) -> str:
    """What a stop leaves: with --store the runs are in the file and the same command goes on with them."""
    if args.store:
        return f"to resume, rerun: {again}"
    return ("its runs lived in memory and are gone: nothing resumes (pass --store FILE to keep runs across "
            "restarts)")
