"""Rows of docs/ptkb-classification.md's table from files of chosen statements: SetP, SetR, SetF, F1_micro, SetF
minus the baseline's and the two-sided paired t-test and sign-flip randomization test (10,000 resamples) of the
per-turn F1 against the baseline (the first file: top-3), as ``ikatkit eval-ptkb --classify`` scores them.

    python bench/ptkb_classify_rows.py --qrels Q --topics T --rel 2 top-3=top3.trec default=C.json ...
"""

from __future__ import annotations

import argparse


def main() -> None:
    from ikatkit.evaluate.ptkb_classify import classify_ptkb
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.evaluate.significance import paired_test
    from ikatkit.runs.io import load_records, named_path, read_run
    from ikatkit.topics import load_topics

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qrels", required=True)
    parser.add_argument("--topics", required=True)
    parser.add_argument("--rel", type=int, default=1)
    parser.add_argument("runs", nargs="+", help="NAME=FILE (TREC ranking of PTKB keys or {qid: {key: score}} JSON)")
    args = parser.parse_args()
    topics, qrels = load_topics(args.topics), load_qrels(args.qrels)
    results = {}
    for named in args.runs:
        name, path = named_path(named)
        run = read_run(path, topics=topics)  # as eval-ptkb --classify reads it: every listed key is cited
        cited = {t.turn_id: dict(t.ranking()) for t in run.turns} if load_records(path)[0] in ("dict", "trec") else run
        results[name or path] = classify_ptkb(cited, qrels, args.rel, topics)
    f1 = f"SetF(rel={args.rel})"
    base = next(iter(results.values()))
    turns = list(base.per_query)
    for name, result in results.items():
        a = [base.per_query[q][f1] for q in turns]
        b = [result.per_query[q][f1] for q in turns]
        tests = [paired_test(a, b, test) for test in ("ttest", "randomization")] if result is not base else []
        m = result.mean
        print(f"| {name} | {m[f'SetP(rel={args.rel})']:.4f} | {m[f'SetR(rel={args.rel})']:.4f} | {m[f1]:.4f} | "
              f"{m[f'F1_micro(rel={args.rel})']:.4f} | {m[f1] - base.mean[f1]:+.4f} | "
              + " | ".join(f"{p:.3f}" for p in tests) + (" |" if tests else " | |"))


if __name__ == "__main__":
    main()
