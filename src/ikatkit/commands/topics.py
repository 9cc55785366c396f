"""``ikatkit topics``: summarise a topic file, print its queries, write its PTKB qrels."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ikatkit.errors import IkatError
from ikatkit.topics import QUERY_KINDS

if TYPE_CHECKING:
    from ikatkit.topics import Topics


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="summarise a topic file, print its queries or write its PTKB qrels")
    p.add_argument("topics", help="topic JSON of iKAT 2023, 2024 or 2025")
    p.add_argument("--year", type=int, help="format year (detected when omitted)")
    p.add_argument("--queries", choices=QUERY_KINDS, help="print 'qid<TAB>text' lines of this kind")
    p.add_argument("--ptkb-qrels", metavar="OUT",
                   help="write PTKB qrels from the topics' ptkb_provenance (for every turn citing statements: "
                        "each statement 1 if cited, else 0; 2024 and 2025 ship no separate PTKB qrels)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.topics import load_topics

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
