"""``ikatkit robustness``: one run of a config per simulated-user behaviour, compared with the clean run."""

from __future__ import annotations

import argparse

from ikatkit.commands import default
from ikatkit.evaluate.significance import CORRECTIONS, TESTS
from ikatkit.simulate.profiles import CLEAN, PARTS
from ikatkit.studies.robustness import robustness


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "robustness", help="run a config once per user behaviour profile and compare each with the clean run",
        description="Perturb the topics with each behaviour profile (as `ikatkit topics perturb`), run the config "
                    "over each, and compare every run with the first profile's (the clean one) as `ikatkit report` "
                    "does: ranking measures with --qrels, response measures against the canonical responses, "
                    "paired tests, tables, a plot per measure, report.html and manifest.json. See docs/robustness.md.")
    p.add_argument("config", help="a run config, e.g. configs/manual.toml")
    p.add_argument("--topics", required=True, help="topic JSON (any year): the clean topics")
    p.add_argument("--qrels", help="passage qrels (ranking measures); leave out to compare responses only")
    p.add_argument("--profiles", nargs="+", default=[CLEAN, "typos", "nonnative", "terse"],
                   help=f"profiles ({CLEAN!r} or parts of {', '.join(PARTS)} joined by '+'); the first is the "
                        "baseline (default: %(default)s)")
    p.add_argument("--seed", type=int, default=default(robustness, "seed"), help="the profiles' seed (default 0)")
    p.add_argument("--out", required=True, help="output folder: topics/, runs/, report.html, manifest.json")
    p.add_argument("--index", help="Lucene index built by `ikatkit index build`")
    p.add_argument("--conversations", nargs="+", help="only these conversations, e.g. 9-1 10-1")
    p.add_argument("--measures", nargs="+", help="ir-measures names (default: the track's measures)")
    p.add_argument("--response-measures", nargs="*", default=list(default(robustness, "response_measures")),
                   help="response measures against the canonical responses (default: %(default)s; none: leave "
                        "responses out)")
    p.add_argument("--test", choices=TESTS, default=TESTS[0])
    p.add_argument("--correction", choices=CORRECTIONS, default=CORRECTIONS[0])
    p.add_argument("--cache", help="cache folder, as for `ikatkit run`")

    def run(args: argparse.Namespace) -> int:
        report = robustness(args.config, args.topics, args.qrels, args.profiles, args.out, seed=args.seed,
                            index=args.index, cache=args.cache, conversations=args.conversations,
                            measures=args.measures, response_measures=args.response_measures, test=args.test,
                            correction=args.correction)
        print(f"report: {report}")
        return 0

    p.set_defaults(func=run)
