"""``ikatkit stages``: every registered pipeline stage with the record fields it requires, reads and provides."""

from __future__ import annotations

import argparse
import json

def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stages", help="list the pipeline stages a config may use, with their declared record fields",
                       description="List every registered stage (built-in and from `ikatkit.stages` entry points) "
                                   "with the record fields it requires, reads in order (set by an earlier stage if "
                                   "at all), reads if set (optional) and provides. Every stage may also write the "
                                   "shared fields notes and rejected.")
    p.add_argument("--json", action="store_true", help="one JSON list of the stages' rows")
    p.set_defaults(func=_stages)


def _stages(args: argparse.Namespace) -> int:
    import sys

    from ikatkit.pipelines.registry import broken_entry_points, stage_table

    rows = stage_table()
    if args.json:
        print(json.dumps(rows, indent=1))
    for row in [] if args.json else rows:
        print(f"{row['name']}: {row['summary']}")
        provides = row["provides"] + [f"{f} (one candidate list)" for f in row["single_list_provides"]]
        for column, fields in (*((c, row[c]) for c in ("requires", "ordered", "optional")), ("provides", provides)):
            if fields:
                print(f"  {column + ':':<10} {', '.join(fields)}")
    for error in broken_entry_points():
        print(f"ikatkit: error: {error}", file=sys.stderr)
    return 2 if broken_entry_points() else 0
