"""``ikatkit view``: a static HTML viewer of runs (:mod:`ikatkit.viewer`)."""

from __future__ import annotations

import argparse


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="a static HTML viewer of runs: conversations, turns, cited passages, PTKB, "
                                    "judgements, two runs side by side",
                       description="Write a self-contained HTML viewer (no server, no network: open index.html) of "
                                   "one or more runs of any format ikatkit reads. With two or more runs, the first "
                                   "two are compared turn by turn (the second minus the first).")
    p.add_argument("runs", nargs="+", help="runs in any supported format; NAME=PATH sets a run's name")
    p.add_argument("--out", required=True, help="folder of the viewer (index.html and c/*.html); nothing else is "
                                                "written")
    p.add_argument("--topics", help="topics: utterances, resolved utterances, PTKBs, titles (TREC runs need them "
                                    "for anything but rankings)")
    p.add_argument("--qrels", help="passage qrels: grades and per-turn measures; TREC qrels for offline runs, or "
                                   "2026 rubric-based qrels (rubric_id doc:passage rel, with --rubrics) for "
                                   "interactive runs: each turn graded by its user's rubric, and the per-user-type "
                                   "table of `eval --by user-type`; qrels that grade no turn are refused")
    p.add_argument("--ptkb-qrels", help="PTKB qrels: each statement's grade per turn")
    p.add_argument("--measures", nargs="+", help="ir-measures names shown per turn and conversation (default: "
                                                 "nDCG@3 nDCG@5 P(rel=2)@20 R(rel=2)@20)")
    texts = p.add_mutually_exclusive_group()
    texts.add_argument("--index", help="Lucene index (ikatkit's or the organizers') holding the passages' texts")
    texts.add_argument("--passages", nargs="+", help="... or passages JSONL files ({\"id\", \"contents\"})")
    p.add_argument("--rubrics", help="2025 rubric questions (rubrics.json or rubrics.csv): the simulated user's "
                                     "rubric scores per conversation")
    p.add_argument("--assessments", nargs="+", help="NIST's assessment files (topic*.final) or their folder")
    p.add_argument("--forms", nargs="+", help="the assessors' forms (guidelines/ikat-*-v1.json or their folder); "
                                              "needed with --assessments")
    p.add_argument("--user-types", help="user id -> user type map (JSON, `simulate --user-map`), as for eval: each "
                                        "2026 user's type beside its id (else the type the run notes)")
    p.add_argument("--judged", help="a judge's labels of the same units (JSON Lines of eval-dialogues --labels-out)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ikatkit.viewer.build import build_viewer

    path = build_viewer(args.runs, Path(args.out), topics=args.topics, qrels=args.qrels, ptkb_qrels=args.ptkb_qrels,
                        measures=args.measures, index=args.index, passages=args.passages, rubrics=args.rubrics,
                        assessments=args.assessments, forms=args.forms, judged=args.judged,
                        user_types=args.user_types)
    print(f"viewer: {path}")
    return 0
