"""``ikatkit topics``: summarise a topic file, print its queries, write its PTKB qrels; ``ikatkit topics perturb``:
the topics said by a simulated user of a behaviour profile."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ikatkit.errors import IkatError
from ikatkit.simulate.profiles import CLEAN, PARTS
from ikatkit.topics import QUERY_KINDS

if TYPE_CHECKING:
    from ikatkit.topics import Topics


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="summarise a topic file, print its queries or write its PTKB qrels; "
                                      "'topics perturb' rewrites its user utterances by a behaviour profile")
    p.add_argument("topics", metavar="TOPICS|perturb", help="topic JSON of iKAT 2023, 2024 or 2025; or 'perturb'")
    p.add_argument("perturbed", nargs="?", metavar="TOPICS",
                   help="perturb TOPICS --profile NAME --out FILE: write the topics with each user utterance said "
                        "by a simulated user of that behaviour (ids, resolved utterances, PTKB and canonical "
                        "responses kept) and a manifest beside (typos.json -> typos.manifest.json)")
    p.add_argument("--year", type=int, help="format year (detected when omitted)")
    p.add_argument("--queries", choices=QUERY_KINDS, help="print 'qid<TAB>text' lines of this kind")
    p.add_argument("--ptkb-qrels", metavar="OUT",
                   help="write PTKB qrels from the topics' ptkb_provenance (for every turn citing statements: "
                        "each statement 1 if cited, else 0; 2024 and 2025 ship no separate PTKB qrels)")
    p.add_argument("--profile", help=f"perturb: {CLEAN!r} or parts of {', '.join(PARTS)} joined by '+' "
                                     "(e.g. typos+impatient); see docs/robustness.md")
    p.add_argument("--seed", type=int, default=0, help="perturb: the seed of the profile's choices (default 0)")
    p.add_argument("--out", help="perturb: the topic file to write (same format as TOPICS)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.topics import load_topics

        if args.topics == "perturb":
            return _perturb(args)
        if args.perturbed or args.profile or args.out:
            raise IkatError("a second topic file, --profile and --out belong to 'topics perturb'", where="topics",
                            fix=f"ikatkit topics perturb {args.perturbed or args.topics} --profile NAME --out FILE")
        topics = load_topics(args.topics, args.year)
        if args.ptkb_qrels:
            return _write_ptkb_qrels(topics, args.ptkb_qrels)
        if args.queries:
            for qid, text in topics.queries(args.queries).items():
                print(f"{qid}\t{text}")
            return 0
        print(json.dumps({"year": topics.year, "conversations": len(topics.conversations), "turns": len(topics),
                          "ptkb_statements": sum(len(c.ptkb) for c in topics.conversations)}, indent=2))
        return 0

    p.set_defaults(func=run)


def _write_ptkb_qrels(topics: Topics, out: str) -> int:
    from ikatkit.evaluate.qrels import write_qrels

    qrels = topics.ptkb_qrels()
    if not qrels:
        raise IkatError("no turn of the topics cites PTKB statements (ptkb_provenance)", path=topics.path,
                        fix="PTKB qrels come from topics with ground truth (released after judging)")
    write_qrels(qrels, out)
    print(f"wrote {sum(map(len, qrels.values()))} PTKB judgements for {len(qrels)} turns to {out}")
    return 0


def _perturb(args: argparse.Namespace) -> int:
    from ikatkit.simulate.profiles import parse_profile
    from ikatkit.studies.robustness import perturb_file

    if not args.perturbed or not args.profile or not args.out:
        raise IkatError("topics perturb needs TOPICS, --profile and --out", where="topics perturb",
                        fix="ikatkit topics perturb TOPICS --profile typos --seed 0 --out typos.json")
    summary = perturb_file(args.perturbed, parse_profile(args.profile, args.seed), args.out, args.year)
    left = f", {len(summary['left'])} conversations left early" if summary["left"] else ""
    print(f"wrote {args.out}: {summary['turns']} turns said by profile {summary['profile']} (seed {summary['seed']}), "
          f"{summary['changed']} utterances changed, {len(summary['answered'])} questions answered{left}; "
          f"manifest {summary['manifest']}")
    return 0
