"""``ikatkit context``: evaluate dialogue context selection methods."""

from __future__ import annotations

import argparse
import sys

from ikatkit.commands import default
from ikatkit.errors import IkatError
from ikatkit.studies.context import evaluate_context
from ikatkit.evaluate.significance import CORRECTIONS, TESTS
from ikatkit.models import DEFAULT_ENCODER
from ikatkit.pipelines.resources import RANKER_KINDS
from ikatkit.stages.context import CHECKS, METHODS, SelectContext


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("context", help="evaluate dialogue context selection methods (no LLM): query = utterance + "
                                       "selected turns' utterances, BM25, paired tests against 'all'")
    p.add_argument("--topics", required=True, help="topic JSON with response_provenance (the oracle reads it)")
    p.add_argument("--index", required=True, help="Lucene index built by `ikatkit index build`")
    judged = p.add_mutually_exclusive_group(required=True)
    judged.add_argument("--qrels", help="TREC qrels (also what oracle_qrels reads)")
    judged.add_argument("--provenance-qrels", action="store_true",
                        help="judge each turn's response_provenance passages relevant (topics without qrels, "
                             "e.g. the 2023 training topics for tuning thresholds)")
    p.add_argument("--methods", nargs="+", help=f"of {', '.join(METHODS)} (default: every one); all, the baseline, "
                                                "is always run")
    p.add_argument("--conversations", nargs="+", help="only these conversations")
    p.add_argument("--n", type=int, default=default(evaluate_context, "n"),
                   help="turns kept by last and cascade_limit (default %(default)s)")
    threshold = [default(SelectContext, "threshold")]
    p.add_argument("--cascade-threshold", type=float, nargs="+", default=threshold,
                   help=f"cascade's joining threshold (default {threshold[0]}); several: a row per value (tuning)")
    p.add_argument("--coherence-threshold", type=float, nargs="+", default=threshold,
                   help=f"coherence's cut threshold (default {threshold[0]}); several: a row per value (tuning)")
    p.add_argument("--passages", type=int, default=default(evaluate_context, "passages"),
                   help="BM25 passages per turn the cascade grounds in")
    p.add_argument("--cascade-check", nargs="+", choices=CHECKS, default=list(default(evaluate_context, "checks")),
                   help="what the cascade scores against a group's passages: the utterance plus the group's turns "
                        "(context, the paper's) or the utterance alone; several: a row per value")
    p.add_argument("--scorer", default=DEFAULT_ENCODER, help="passage-checking / coherence model")
    p.add_argument("--scorer-kind", choices=[*RANKER_KINDS, "lexical"], default="bi-encoder",
                   help="lexical: TF-IDF cosine over --index's statistics, no model (--scorer is not read)")
    p.add_argument("--k", type=int, default=default(evaluate_context, "k"), help="BM25 depth")
    p.add_argument("--rerank", help="re-rank the top --rerank-depth with this model (kind: --rerank-kind)")
    p.add_argument("--rerank-kind", choices=RANKER_KINDS, default="bi-encoder")
    p.add_argument("--rerank-depth", type=int, default=default(evaluate_context, "rerank_depth"))
    p.add_argument("--llm", help="rewrite with this LLM from each method's context instead of concatenating "
                                 "(transformers backend, e.g. bundled:smollm2)")
    p.add_argument("--max-new-tokens", type=int, default=48, help="LLM rewrite length")
    p.add_argument("--cache", help="cache folder, as for `ikatkit run`: LLM outputs go to its llm/ "
                                   "(default: $IKATKIT_CACHE, else .cache/ikatkit "
                                   "in a checkout, else ~/.cache/ikatkit)")
    p.add_argument("--test", choices=TESTS, default=default(evaluate_context, "test"))
    p.add_argument("--correction", choices=CORRECTIONS, default=default(evaluate_context, "correction"))
    p.add_argument("--out", help="also write context.md and context.json here")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.studies.context import provenance_qrels, write_evaluation
        from ikatkit.stages.context import SCORED_METHODS, check_options
        from ikatkit.rank import make_ranker
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics)
        if args.conversations:
            topics = topics.subset(args.conversations)
        methods = args.methods or list(METHODS)
        checks = [("--methods", {"method": m, "qrels": "--qrels"}) for m in methods] + \
            [("--cascade-threshold", {"threshold": v}) for v in args.cascade_threshold] + \
            [("--coherence-threshold", {"threshold": v}) for v in args.coherence_threshold] + \
            [("--n", {"n": args.n}), ("--passages", {"passages": args.passages})]
        for flag, options in checks:
            try:
                check_options(options, "manual")
            except IkatError as err:
                raise IkatError(err.message, where=flag, fix=err.fix) from None
        scorer = None
        if set(SCORED_METHODS) & set(methods):
            from ikatkit.rank.lexical import TfidfCosine

            scorer = TfidfCosine(args.index) if args.scorer_kind == "lexical" else \
                make_ranker(args.scorer_kind, args.scorer)
        reranker = make_ranker(args.rerank_kind, args.rerank) if args.rerank else None
        llm = None
        if args.llm:
            from ikatkit.llm import command_llm

            llm = command_llm(None, args.llm, args.cache, max_new_tokens=args.max_new_tokens)
        qrels = provenance_qrels(topics) if args.provenance_qrels else args.qrels
        result = evaluate_context(topics, args.index, qrels,
                                  methods=methods, n=args.n, passages=args.passages, scorer=scorer, k=args.k,
                                  checks=args.cascade_check,
                                  thresholds={"cascade": args.cascade_threshold, "coherence": args.coherence_threshold},
                                  reranker=reranker, rerank_depth=args.rerank_depth, llm=llm, test=args.test,
                                  correction=args.correction)
        sys.stdout.write(result.to_markdown())
        if args.out:
            write_evaluation(result, args.out)
        return 0

    p.set_defaults(func=run)
