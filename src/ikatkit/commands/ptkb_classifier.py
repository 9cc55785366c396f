"""``ikatkit train-ptkb-classifier`` and ``classify-ptkb``: the trained PTKB model of the ``rank_ptkb`` and
``classify_ptkb`` stages (:mod:`ikatkit.rank.ptkb_model`) and its baselines, without a pipeline."""

from __future__ import annotations

import argparse

from ikatkit.models import DEFAULT_ENCODER
from ikatkit.topics import QUERY_KINDS

CITE = ("none", "all")
DEFAULT_MODEL = "bundled:ptkb"  # ikatkit.rank.ptkb_model.DEFAULT (not imported)
FEATURES = ("responses", "conversation", "turn", "relative", "none")  # ikatkit.rank.ptkb_model.FEATURE_SETS
FINETUNE = ("bi", "cross", "bi+context", "cross+context")  # ikatkit.rank.ptkb_model.FINETUNE, and none
DECISIONS = ("at-least-one", "threshold", "expected-f1")  # ikatkit.rank.ptkb_model.DECISIONS


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
                                   "against the turn's query and the conversation so far, on the turns whose "
                                   "ptkb_provenance labels them, with the probability threshold chosen by "
                                   "cross-validation grouped by conversation; write it as JSON for the "
                                   "rank_ptkb and classify_ptkb stages (classifier = FILE) and "
                                   "`ikatkit classify-ptkb`. The file is yours: keep it out of the repository.")
    p.add_argument("topics", help="topic JSON whose turns carry ptkb_provenance (train topics only)")
    p.add_argument("--model", default=DEFAULT_ENCODER, help="bi-encoder model (default %(default)s)")
    _ranker_options(p)
    p.add_argument("--features", choices=FEATURES, default="responses",
                   help="responses: the score, gap to the best and 1/rank of rank_ptkb's ranking with the last 2 "
                        "responses, and the conversation's scores (default, chosen by cross-validation on the 2023 "
                        "train topics, as the default fine-tuning); conversation: the same with the query's own "
                        "ranking; turn: the query's score, gap to the best and 1/rank only (the first classifier); "
                        "relative: rank_ptkb's and the conversation's scores relative to the PTKB (gaps, z-scores, "
                        "share ranked above: the shipped default's); "
                        "none: the fine-tuned model's score alone (with --finetune)")
    p.add_argument("--finetune", choices=(*FINETUNE, "none"), default="bi",
                   help="also fine-tune the model on the labelled (turn, statement) pairs, as a bi-encoder or a "
                        "cross-encoder reading the query (+context: after the opening and the last 2 earlier "
                        "utterances), and add its score as a feature; its files go to OUT.finetuned/ beside OUT "
                        "(default %(default)s with --epochs 2, chosen by cross-validation on the 2023 train topics: "
                        "six fine-tunings, minutes; none: no fine-tuning, a minute's training)")
    p.add_argument("--epochs", type=int, default=2, help="fine-tuning epochs (default %(default)s)")
    p.add_argument("--decision", choices=DECISIONS, default="at-least-one",
                   help="a turn's set: the statements at or above the threshold, and the most probable one where "
                        "none reaches it (at-least-one: a turn citing nothing scores F1 0; default), or those alone "
                        "(threshold: the models before this option), or the most probable k with the best expected "
                        "F1 (expected-f1: no threshold; the shipped default's rule)")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds for the threshold")
    p.add_argument("--out", required=True, help="the classifier's JSON file")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines.queries import queries_for
        from ikatkit.rank import make_ranker
        from ikatkit.rank.ptkb_model import check_options, train_model
        from ikatkit.topics import load_topics

        finetune = None if args.finetune == "none" else args.finetune
        check_options(args.features, finetune, args.epochs, args.decision)
        topics = load_topics(args.topics)
        trained = train_model(topics, queries_for(args.queries, args.topics), make_ranker("bi-encoder", args.model),
                              "bi-encoder", args.model, args.features, args.folds, finetune=finetune,
                              epochs=args.epochs, decision=args.decision)
        trained = trained.save(args.out)
        on = trained.trained_on
        print(f"trained on {on['turns']} turns of {on['conversations']} conversations ({on['relevant']} of "
              f"{on['statements']} statements relevant; data {on['fingerprint']}); threshold "
              f"{trained.threshold:.4f} ({trained.decision}) -> {args.out}"
              + (f" (fine-tuned model: {args.out}.finetuned/)" if trained.finetuned else ""))
        return 0

    p.set_defaults(func=run)


def _add_classify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("classify-ptkb", help="choose each turn's PTKB statements with a trained classifier (by "
                                             "default the shipped one; or cite all / none); writes {qid: {key: "
                                             "score}} for eval-ptkb --classify")
    p.add_argument("topics", help="topic JSON")
    chosen = p.add_mutually_exclusive_group()
    chosen.add_argument("--classifier", default=DEFAULT_MODEL,
                        help="a file of `ikatkit train-ptkb-classifier` (default %(default)s: the shipped model, "
                             "trained on every 2023 label; docs/ptkb-classification.md)")
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
            from ikatkit.pipelines.queries import queries_for
            from ikatkit.rank import make_ranker
            from ikatkit.rank.ptkb_model import PtkbModel, topic_choices, topic_turns

            trained = PtkbModel.load(args.classifier)
            turns = topic_turns(topics, queries_for(args.queries, args.topics))
            cited = {qid: dict(chosen) for qid, chosen in
                     topic_choices(trained, make_ranker(trained.kind, trained.model), turns).items()}
        write_text(args.out, json.dumps(cited, indent=1) + "\n")
        print(f"{sum(map(len, cited.values()))} statements cited over {len(cited)} turns -> {args.out}")
        return 0

    p.set_defaults(func=run)
