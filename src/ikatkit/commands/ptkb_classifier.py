"""``ikatkit train-ptkb-classifier`` and ``classify-ptkb``: the trained PTKB classifier of the ``classify_ptkb``
stage (:mod:`ikatkit.stages.ptkb_classifier`) and its baselines, without a pipeline."""

from __future__ import annotations

import argparse

from ikatkit.models import DEFAULT_ENCODER
from ikatkit.topics import QUERY_KINDS

CITE = ("none", "all")


def add(sub: argparse._SubParsersAction) -> None:
    _add_train(sub)
    _add_classify(sub)


def _ranker_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queries", default="manual", metavar="|".join(QUERY_KINDS) + "|FILE",
                   help="raw or resolved utterances of the topics, or a file of 'qid<TAB>text' lines")


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train-ptkb-classifier", help="train the classify_ptkb stage's PTKB classifier on topics "
                                                     "with PTKB labels (e.g. the 2023 train topics)",
                       description="Fit a logistic model over a ranker's scores of each turn's PTKB statements "
                                   "(score, gap to the turn's best, 1/rank) on the turns whose ptkb_provenance "
                                   "labels them, with the threshold chosen by cross-validation over "
                                   "conversations; write it as JSON for `classify_ptkb` (classifier = FILE) and "
                                   "`ikatkit classify-ptkb`.")
    p.add_argument("topics", help="topic JSON whose turns carry ptkb_provenance (train topics only)")
    p.add_argument("--model", default=DEFAULT_ENCODER, help="bi-encoder model (default %(default)s)")
    _ranker_options(p)
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds for the threshold")
    p.add_argument("--out", required=True, help="the classifier's JSON file")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.stages.ptkb_classifier import train_classifier
        from ikatkit.pipelines.queries import queries_for
        from ikatkit.rank import make_ranker
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics)
        trained = train_classifier(topics, queries_for(args.queries, args.topics),
                                   make_ranker("bi-encoder", args.model), "bi-encoder", args.model, args.folds)
        trained.save(args.out)
        print(f"trained on {trained.trained_on['turns']} turns ({trained.trained_on['relevant']} of "
              f"{trained.trained_on['statements']} statements relevant); threshold {trained.threshold:.4f} "
              f"-> {args.out}")
        return 0

    p.set_defaults(func=run)


def _add_classify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("classify-ptkb", help="choose each turn's PTKB statements with a trained classifier (or "
                                             "cite all / none); writes {qid: {key: score}} for eval-ptkb --classify")
    p.add_argument("topics", help="topic JSON")
    chosen = p.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--classifier", help="a file of `ikatkit train-ptkb-classifier`")
    chosen.add_argument("--cite", choices=CITE, help="a baseline: cite every statement, or none")
    _ranker_options(p)
    p.add_argument("--out", required=True, help="JSON {qid: {ptkb_key: score}}")

    def run(args: argparse.Namespace) -> int:
        import json

        from ikatkit.atomic import write_text
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics)
        if args.cite:
            cited = {turn.qid: dict.fromkeys(topics.conversation_of(turn.qid).ptkb if args.cite == "all" else (),
                                             1.0) for turn in topics}
        else:
            from ikatkit.stages.ptkb_classifier import PtkbClassifier, ranked_turns
            from ikatkit.pipelines.queries import queries_for
            from ikatkit.rank import make_ranker

            trained = PtkbClassifier.load(args.classifier)
            ranked = ranked_turns(topics, queries_for(args.queries, args.topics),
                                  make_ranker(trained.kind, trained.model))
            cited = {qid: dict(trained.choose(items)) for qid, items in ranked.items()}
        write_text(args.out, json.dumps(cited, indent=1) + "\n")
        print(f"{sum(map(len, cited.values()))} statements cited over {len(cited)} turns -> {args.out}")
        return 0

    p.set_defaults(func=run)
