"""``ikatkit validate`` and ``ikatkit convert``: check a run against the topics, convert it between formats."""

from __future__ import annotations

import argparse

from ikatkit.runs.io import FORMATS


def add(sub: argparse._SubParsersAction) -> None:
    _add_validate(sub)
    _add_convert(sub)


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a run against the topics: the organizers' rules and more")
    p.add_argument("run", help="a run: official 2023/2024 JSON, 2025 JSONL, a released 2025 interactive run or "
                               "a simulation API dump, TREC, or {qid: {pid: score}} JSON")
    p.add_argument("--topics", required=True, help="the year's topic JSON")
    p.add_argument("--year", type=int, help="topic format year (detected when omitted)")
    ids = p.add_mutually_exclusive_group()
    ids.add_argument("--index", help="check that every passage exists in this Lucene index")
    ids.add_argument("--ids", help="... or in this id file (one id per line) or hash file (doc_id<TAB>n<TAB>md5)")
    p.add_argument("--max-warnings", type=lambda v: v if v == "official" else int(v),
                   help="fail above this many warnings; 'official' = the organizers' limit (2000 in 2023 and 2024)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.runs.validate import validate_run
        from ikatkit.topics import load_topics

        report = validate_run(args.run, load_topics(args.topics, args.year), ids=args.index or args.ids,
                              max_warnings=args.max_warnings)
        print(report)
        return 0 if report.ok else 1

    p.set_defaults(func=run)


def _add_convert(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert a run between the 2023/2024 JSON, 2025 JSONL, released 2025/2026 "
                                       "interactive and TREC formats (e.g. a simulation dump to the released shape; "
                                       "a 2026 run, whose rows name their user, to 2026-interactive)")
    p.add_argument("run", help="a run in any supported format")
    p.add_argument("--to", required=True, choices=FORMATS)
    p.add_argument("--out", required=True, help="output file")
    p.add_argument("--topics", help="topics, to fill PTKB statement texts/keys the target format needs")
    p.add_argument("--team-id", help="team id (2025 metadata)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.runs.io import read_run, write_run
        from ikatkit.runs.templates import load_template
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics) if args.topics else None
        converted = read_run(args.run, topics=topics)
        users = {t.user_id for t in converted.turns if t.user_id}
        if users and args.to == "2025-interactive":
            from ikatkit.errors import IkatError

            raise IkatError(f"the run's turns belong to {len(users)} simulated users (a 2026 run): the 2025 shape "
                            "cannot tell them apart", path=args.run, fix="use --to 2026-interactive")
        converted.year = load_template(args.to).year if args.to != "trec" else converted.year
        if args.team_id:
            converted.team_id = args.team_id
        write_run(converted, args.out, args.to, topics=topics)
        print(f"wrote {len(converted.turns)} turns as {args.to} to {args.out}")
        return 0

    p.set_defaults(func=run)
