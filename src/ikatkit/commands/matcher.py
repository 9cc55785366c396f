"""``ikatkit eval-matcher``: a nugget matcher's labels against human matching labels (agreement, per-run recall)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ikatkit.errors import IkatError

MATCHERS = ("embedding", "lexical", "llm", "cross-encoder")


def _threshold(text: str) -> float | str:
    if text == "cv":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number nor 'cv'") from None


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval-matcher", help="agreement of a nugget matcher with human matching labels (iKAT 2024)")
    p.add_argument("labels", help="human labels: {hit}_{conversation}_{turn}_{nugget}_{team-run}<TAB>{0|1} per line")
    p.add_argument("--nuggets", required=True, help="the passage-span gold nuggets the labels number "
                                                    "(gold_nuggets_human.json)")
    p.add_argument("--responses", nargs="+", required=True,
                   help="participant-response JSON files {turn: {run_id: response}} (or run files)")
    p.add_argument("--matcher", choices=MATCHERS, help="matcher (default: eval-responses' default, embedding)")
    p.add_argument("--threshold", type=_threshold,
                   help="score threshold, or 'cv': tuned leaving one conversation out (default: the matcher's own)")
    p.add_argument("--model", help="embedding model (default bundled:minilm), cross-encoder NLI model id/folder, "
                                   "or the LLM (transformers backend, e.g. bundled:smollm2)")
    p.add_argument("--llm-config", help="TOML or JSON of the judge LLM (instead of --model) for --matcher llm")
    p.add_argument("--cache", help="cache folder for LLM outputs (default $IKATKIT_CACHE or .cache/ikatkit)")
    p.add_argument("--tag", action="append", default=[], metavar="TAG=RUN", help="map a team-run tag to a run id")
    p.add_argument("--conversations", nargs="+", help="only the labels of these conversations")
    p.add_argument("--tags", nargs="+", help="only the labels of these team-run tags (e.g. those mapped by name)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the kappa interval")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--format", choices=["tsv", "json"], default="tsv")
    p.set_defaults(func=run)


def make_matcher(args: argparse.Namespace) -> Any:
    """The matcher named by the options, at its default threshold."""
    from ikatkit.evaluate.responses import nuggets as ng

    name = args.matcher or ng.DEFAULT_MATCHER
    if name == "embedding":
        from ikatkit.evaluate.responses.scorers import DEFAULT_MODEL, Embedder

        return ng.EmbeddingMatcher(Embedder(args.model or DEFAULT_MODEL))
    if name == "lexical":
        return ng.LexicalMatcher()
    if name == "cross-encoder":
        if not args.model:
            raise IkatError("the cross-encoder matcher needs --model", where="--matcher cross-encoder",
                            fix="pass an NLI cross-encoder id or folder (e.g. cross-encoder/nli-deberta-v3-base)")
        return ng.CrossEncoderMatcher(args.model)
    from ikatkit.llm import command_llm

    if not (args.llm_config or args.model):
        raise IkatError("the LLM matcher needs --model or --llm-config", where="--matcher llm",
                        fix="pass --model bundled:smollm2 or an LLM config file")
    return ng.LlmMatcher(command_llm(args.llm_config, args.model, args.cache))


def run(args: argparse.Namespace) -> int:
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from ikatkit.evaluate.responses import agreement as ag
    from ikatkit.evaluate.responses.data import read_named_response_runs, read_nuggets

    if args.threshold is not None and args.matcher == "llm":
        raise IkatError("the LLM matcher gives labels, not scores: no threshold", where="--threshold",
                        fix="leave --threshold out with --matcher llm")
    labels = ag.read_labels(args.labels)
    nuggets = read_nuggets(args.nuggets)
    if all(n.grade == 0 for group in nuggets.values() for n in group):
        raise IkatError("these are the gold responses' atomic nuggets; the labels number the passage-span nuggets",
                        path=args.nuggets, fix="pass gold_nuggets_human.json")
    ag.check_nuggets(labels, nuggets, args.nuggets)
    runs = {r.name: r for r in read_named_response_runs(args.responses, None)}
    given = dict(item.split("=", 1) for item in args.tag if "=" in item)
    unknown = [item for item in args.tag if "=" not in item or item.split("=", 1)[0] not in {x.tag for x in labels}]
    if unknown:
        raise IkatError(f"--tag {unknown[0]!r} names no tag of the labels as TAG=RUN", where="--tag",
                        fix=f"use TAG=RUN with a tag of {sorted({x.tag for x in labels})}")
    tag_runs = ag.map_tags(labels, runs, nuggets, args.labels, given)  # on all labels, whatever is reported
    if args.conversations or args.tags:
        labels = [label for label in labels if label.conversation in set(args.conversations or [label.conversation])
                  and label.tag in set(args.tags or [label.tag])]
        if not labels:
            raise IkatError(f"no label of conversations {args.conversations} and tags {args.tags}",
                            path=args.labels, fix="name conversations and tags the file has")
        tag_runs = {tag: m for tag, m in tag_runs.items() if tag in {x.tag for x in labels}}
    matcher = make_matcher(args)
    human = np.asarray([label.human for label in labels])
    values = ag.pair_scores(matcher, labels, runs, {t: m.run for t, m in tag_runs.items()}, nuggets)
    scored = hasattr(matcher, "scores")
    folds: list[ag.Fold] = []
    if args.threshold == "cv":
        predicted, folds = ag.cross_validate(values, human, [label.conversation for label in labels])
        threshold: Any = "cv"
    elif scored:
        threshold = matcher.threshold if args.threshold is None else args.threshold
        predicted = (values >= threshold).astype(int)
    else:
        threshold, predicted = None, (values >= 0.5).astype(int)
    result = ag.agreement(human, predicted, [tag_runs[label.tag].run for label in labels], args.bootstrap, args.seed)
    out = {"matcher": matcher.label.split(">=")[0] if scored else matcher.label, "threshold": threshold,
           **result.to_json(),
           "auc": float(roc_auc_score(human, values)) if scored and len(set(human.tolist())) == 2 else None,
           "folds": [vars(f) | {"tuned_on": list(f.tuned_on)} for f in folds],
           "tags": {t: {"run": m.run, "how": m.how, "fit_auc": m.fit, "runner_up": m.runner_up,
                        "candidates": m.candidates} for t, m in tag_runs.items()},
           "llm": dict(matcher.llm.stats) if hasattr(matcher, "llm") else None}  # calls, parse fallbacks ...
    if args.format == "json":
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    for key in ("matcher", "threshold", "pairs", "accuracy", "balanced_accuracy", "precision", "recall", "kappa"):
        value = out[key]
        sys.stdout.write(f"{key}\t{value:.4f}\n" if isinstance(value, float) else f"{key}\t{value}\n")
    sys.stdout.write(f"kappa_ci\t{out['kappa_ci'][0]:.4f}\t{out['kappa_ci'][1]:.4f}\n")
    for key in ("run_tau", "auc"):
        sys.stdout.write(f"{key}\t{'' if out[key] is None else format(out[key], '.4f')}\n")
    for fold in folds:
        sys.stdout.write(f"fold\t{fold.conversation}\t{fold.threshold:.4f}\t{fold.pairs}\n")
    for tag, m in tag_runs.items():
        row = result.runs[m.run]
        sys.stdout.write(f"run\t{tag}\t{m.run}\t{m.how}\t{row['pairs']}\t{row['human']:.4f}\t{row['matcher']:.4f}\n")
    return 0
