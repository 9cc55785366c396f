"""``ikatkit index verify``: passages (an index or a passages JSONL) against the organizers' passage hashes."""

from __future__ import annotations

import argparse


def add(isub: argparse._SubParsersAction) -> None:
    """Register ``verify`` under ``ikatkit index``."""
    p = isub.add_parser("verify", help="check an index's or a passages file's passages against the official hashes",
                        description="Stream the passages of INDEX_OR_PASSAGES (a Lucene index storing its texts, or "
                                    "a passages JSONL in document id order) and the organizers' hash file "
                                    "(doc_id<TAB>passage_number<TAB>md5 of the text as UTF-8, sorted by doc id) side "
                                    "by side; report matched / different text / missing / extra passages. Exit 0 "
                                    "only when all match.")
    p.add_argument("source", metavar="INDEX_OR_PASSAGES")
    p.add_argument("--hashes", required=True, metavar="FILE[.bz2]", help="2023_passages_hashes.tsv or .tsv.bz2")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ikatkit.index.verify import verify

    report = verify(args.source, args.hashes)
    print(report)
    return 0 if report.ok else 1
