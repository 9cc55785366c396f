"""``ikatkit eval-dialogues``: NIST's assessments of the 2025 interactive runs as measures, the same dimensions
judged by an LLM, and any judge's agreement with NIST (:mod:`ikatkit.evaluate.assessments`,
:mod:`ikatkit.evaluate.dialogue_judge`)."""

from __future__ import annotations

import argparse
import json
import sys


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval-dialogues", help="NIST's assessments of interactive runs (2025): per-run means, an LLM "
                                              "judge of the same dimensions, agreement with NIST",
                       description="Read NIST's assessment files (topic*.final) with the assessors' forms; without a "
                                   "judge print each run's mean ordinal value per dimension (5 = the form's best "
                                   "option); with --model/--llm-config judge the same units with an LLM, or with "
                                   "--judged read a judge's labels, and report agreement with NIST per dimension.")
    p.add_argument("assessments", nargs="+", help="topic*.final files or their folder (interactive/assessements/NIST)")
    p.add_argument("--forms", nargs="+", required=True, help="the forms: guidelines/ikat-*-v1.json or their folder")
    p.add_argument("--runs", nargs="+", help="only these runs (runtags)")
    p.add_argument("--level", choices=["dialogue", "fragment", "both"], default="both")
    p.add_argument("--limit", type=int, help="only the first N units (after --runs and --level), in file order")
    judge = p.add_mutually_exclusive_group()
    judge.add_argument("--model", help="judge LLM on the transformers backend (e.g. bundled:smollm2)")
    judge.add_argument("--llm-config", help="TOML or JSON of the judge LLM")
    judge.add_argument("--judged", help="a judge's labels (JSON Lines of --labels-out) instead of an LLM")
    p.add_argument("--topics", help="2025 topics: each conversation's PTKB for the judge (default: the statements "
                                    "the run's answers cite)")
    p.add_argument("--labels-out", help="write the LLM judge's labels here (JSON Lines, for --judged)")
    p.add_argument("--cache", help="cache folder for LLM outputs (default $IKATKIT_CACHE or .cache/ikatkit)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the weighted kappa interval")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--by", choices=["run", "user-type"], default="run",
                   help="user-type (2026 assessments, whose entries name their user): each run's means per user type, "
                        "with the conversations each type's dialogues cover (coverage) beside them")
    p.add_argument("--user-types", help="with --by user-type: user id -> type map (JSON) for entries naming a user id")
    p.add_argument("--format", choices=["tsv", "json"], default="tsv")
    p.add_argument("--out", help="write the report here instead of standard output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ikatkit.atomic import write_text
    from ikatkit.evaluate.assessments import DIALOG_FORM, read_assessments, read_forms, run_means

    forms = read_forms(args.forms)
    every = read_assessments(args.assessments, forms)
    units = [a for a in every if (not args.runs or a.run in args.runs)
             and args.level in ("both", "dialogue" if a.form == DIALOG_FORM else "fragment")]
    units = units[:args.limit] if args.limit else units
    if not units:
        from ikatkit.errors import IkatError

        raise IkatError("no assessed unit left to report", where="--runs / --level / --limit",
                        fix="check the run names (runtag) and the level")
    report: dict
    if args.by == "user-type":
        report, text = _by_type(args, units, forms)
    elif not (args.model or args.llm_config or args.judged):
        means = run_means(units, forms)
        report = {"units": len(units), "run_means": means}
        text = (json.dumps(report, indent=2) + "\n" if args.format == "json" else
                "".join(f"{dim}\t{run}\t{value:.4f}\n" for run, dims in means.items() for dim, value in dims.items()))
    else:
        report = _agreement(args, units, every, forms)
        text = json.dumps(report, indent=2) + "\n" if args.format == "json" else _table(report["agreement"])
    if args.out:
        write_text(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


def _by_type(args: argparse.Namespace, units: list, forms: dict) -> tuple[dict, str]:
    """Means per run and user type, coverage beside them (NIST's labels; a judge's with --by run)."""
    from ikatkit.evaluate.assessments import type_means
    from ikatkit.evaluate.user_types import read_user_types

    if args.model or args.llm_config or args.judged:
        from ikatkit.errors import IkatError

        raise IkatError("--by user-type reports the assessments' own labels", where="--by",
                        fix="leave out --model/--llm-config/--judged, or --by")
    table = type_means(units, forms, read_user_types(args.user_types) if args.user_types else None)
    report = {"units": len(units), "by_user_type": table}
    if args.format == "json":
        return report, json.dumps(report, indent=2) + "\n"
    dims = list(dict.fromkeys(d for types in table.values() for row in types.values() for d in row["mean"]))
    lines = ["\t".join(["run", "user_type", "dialogues", "conversations", "coverage", *dims])]
    for run, types in table.items():
        for kind, row in types.items():
            values = ["n/a" if d not in row["mean"] else f"{row['mean'][d]:.4f}" for d in dims]
            lines.append("\t".join([run, kind, str(row["dialogues"]), str(row["conversations"]),
                                    f"{row['coverage']:.4f}", *values]))
    return report, "\n".join(lines) + "\n"


def _agreement(args: argparse.Namespace, units: list, every: list, forms: dict) -> dict:
    from ikatkit.atomic import write_text
    from ikatkit.evaluate.dialogue_judge import (DialogueJudge, dialogue_agreement, judged_records,
                                                  read_judged)

    info: dict = {"units": len(units)}
    if args.judged:
        judged = read_judged(args.judged, units)
        info["judge"] = args.judged
    else:
        from ikatkit.llm import command_llm

        judge = DialogueJudge(command_llm(args.llm_config, args.model, args.cache), forms)
        ptkb = None
        if args.topics:
            from ikatkit.topics import load_topics

            ptkb = {c.id: list(c.ptkb.values()) for c in load_topics(args.topics).conversations}
        judged = judge.judge(units, every, ptkb)
        info.update({"judge": judge.label, "llm": dict(judge.llm.stats)})
        if args.labels_out:
            write_text(args.labels_out, "".join(json.dumps(r) + "\n" for r in judged_records(units, judged,
                                                                                            judge.label)))
    return {**info, "agreement": dialogue_agreement(units, judged, forms, args.bootstrap, args.seed)}


def _table(agreement: dict) -> str:
    head = ("dimension\tunits\tno_label\texact\twithin_one\tkappa\tweighted_kappa\t95% CI\tnist_mean\tjudge_mean"
            "\trun_tau\n")
    rows = []
    for dim, r in agreement.items():
        if "exact" not in r:
            rows.append(f"{dim}\t{r['units']}\t{r['no_label']}" + "\t-" * 8 + "\n")
            continue
        tau = "-" if r["run_tau"] is None else f"{r['run_tau']:.3f}"
        lo, hi = r["weighted_kappa_ci"]
        rows.append(f"{dim}\t{r['units']}\t{r['no_label']}\t{r['exact']:.3f}\t{r['within_one']:.3f}\t{r['kappa']:.3f}"
                    f"\t{r['weighted_kappa']:.3f}\t[{lo:.3f}, {hi:.3f}]\t{r['nist_mean']:.3f}\t{r['judge_mean']:.3f}"
                    f"\t{tau}\n")
    return head + "".join(rows)
