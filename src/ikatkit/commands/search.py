"""``ikatkit search``, ``rerank`` and ``ptkb``: retrieval and ranking without a pipeline, through the functions the
stages use (:mod:`ikatkit.retrieve.search`, :mod:`ikatkit.rank.rerank`, :func:`ikatkit.rank.base.rank_ptkb`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ikatkit.commands import default
from ikatkit.commands.ptkb_classifier import DEFAULT_MODEL
from ikatkit.errors import IkatError
from ikatkit.models import DEFAULT_ENCODER
from ikatkit.stages.core import RankPtkb
from ikatkit.rank.standalone import rerank_run
from ikatkit.retrieve.bm25 import Bm25Searcher
from ikatkit.retrieve.fusion import METHODS
from ikatkit.retrieve.search import search
from ikatkit.retrieve.sparse import SparseSearcher
from ikatkit.topics import QUERY_KINDS


def add(sub: argparse._SubParsersAction) -> None:
    _add_search(sub)
    _add_rerank(sub)
    _add_ptkb(sub)


def _ranker_arguments(p: argparse.ArgumentParser, kind: str) -> None:
    from ikatkit.pipelines.resources import RANKER_KINDS

    p.add_argument("--model", default=DEFAULT_ENCODER,
                   help="ranker model: hub id, folder, or bundled:minilm")
    p.add_argument("--kind", choices=RANKER_KINDS, default=kind)
    p.add_argument("--queries", default="manual", metavar="|".join(QUERY_KINDS) + "|FILE",
                   help="raw or resolved utterances of the topics, or a file of 'qid<TAB>text' lines")


def _add_search(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="BM25 (+RM3), dense, learned sparse (SPLADE) or hybrid search of the topics' "
                                       "queries or a query file; writes a TREC run")
    p.add_argument("--index", help="Lucene index (BM25)")
    p.add_argument("--dense", help="dense index of `ikatkit index dense`; with --index or --sparse: hybrid, fused by "
                                   "--fusion")
    p.add_argument("--sparse", help="learned sparse index: `ikatkit index sparse`'s, Anserini's impact index (with "
                                    "--sparse-model) or the organizers' SPLADE index (array_index.h5py, doc_ids.pkl); "
                                    "with --index or --dense: hybrid, fused by --fusion")
    p.add_argument("--sparse-model", help="--sparse's query encoder (default: the index manifest's model; for the "
                                          "organizers' index, naver/splade-cocondenser-ensembledistil, which must be "
                                          "in the local Hugging Face cache)")
    p.add_argument("--allow-other-model", action="store_true",
                   help="let --sparse-model differ from the model the index manifest names (refused otherwise)")
    p.add_argument("--sparse-max-length", type=int,
                   help="query tokens the organizers' SPLADE index encodes (default: the official baseline's)")
    p.add_argument("--device", help="where --sparse encodes the queries (default: the CPU), e.g. cuda")
    p.add_argument("--threads", type=int, default=default(SparseSearcher, "threads"),
                   help="Java threads of the --sparse search (default %(default)s)")
    p.add_argument("--fusion", choices=METHODS, default="rrf",
                   help="hybrid: rrf, reciprocal rank fusion (k=60); weighted, min-max normalised scores weighted; "
                        "interleave, round robin")
    p.add_argument("--dense-weight", type=float,
                   help="weighted fusion: dense's weight (the unnamed lists share what is left of 1; default: equal "
                        "weights)")
    p.add_argument("--sparse-weight", type=float, help="weighted fusion: --sparse's weight (as --dense-weight)")
    p.add_argument("--topics", help="topic JSON (needed for --queries raw|manual)")
    p.add_argument("--queries", default="manual", metavar="|".join(QUERY_KINDS) + "|FILE",
                   help="raw or resolved utterances of --topics, or a file of 'qid<TAB>text' lines (own rewrites)")
    p.add_argument("--k", type=int, default=default(search, "k"), help="passages per query (default %(default)s)")
    p.add_argument("--k1", type=float, default=default(Bm25Searcher, "k1"))
    p.add_argument("--b", type=float, default=default(Bm25Searcher, "b"))
    p.add_argument("--rm3", action="store_true", help="RM3 expansion (fb_terms 10, fb_docs 10, weight 0.5)")
    p.add_argument("--out", required=True, help="TREC run file")
    p.add_argument("--run-name", help="default: what was searched, e.g. bm25, splade, bm25+dense")
    p.add_argument("--run-type", choices=["automatic", "manual"],
                   help="default: manual for --queries manual, else automatic")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines.queries import queries_for
        from ikatkit.retrieve.search import fuse_per_query, search_all
        from ikatkit.runs.io import write_run
        from ikatkit.runs.model import ranking_run

        if not args.index and not args.dense and not args.sparse:
            raise IkatError("nothing to search", fix="pass --index (BM25), --dense (dense), --sparse (SPLADE) or "
                                                     "several (hybrid)")
        weights = _fusion_weights(args)
        queries = queries_for(args.queries, args.topics)
        searchers = _searchers(args)
        counted = f"{len(queries)} quer{'y' if len(queries) == 1 else 'ies'}"
        print(f"searching {counted} (k={args.k}) with {', '.join(n for n, _ in searchers)}", file=sys.stderr,
              flush=True)
        found = search_all([searcher for _, searcher in searchers], queries, args.k)
        hits = found[0] if len(found) == 1 else fuse_per_query(found, args.fusion, args.k, weights)
        run_type = args.run_type or ("manual" if args.queries == "manual" else "automatic")
        name = args.run_name or "+".join(kind for kind, _ in searchers)
        write_run(ranking_run(name, run_type, hits), args.out, "trec")
        sparse = next((found for kind, found in searchers if kind == "splade"), None)
        said = f" (queries encoded by {sparse.encoder.name})" if sparse is not None else ""
        print(f"wrote {sum(map(len, hits.values()))} hits for {counted} to {args.out}{said}")
        return 0

    p.set_defaults(func=run)


def _searchers(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """``(name, searcher)`` of each index searched (BM25, dense, learned sparse, in that order), each opened by
    :func:`ikatkit.artifact.open_index` as the kind it is searched as; a line on stderr as each opens."""
    from ikatkit.artifact import open_index
    from ikatkit.extras import require

    wanted = [("bm25", args.index, {"k1": args.k1, "b": args.b, "rm3": {} if args.rm3 else None}),
              ("dense", args.dense, {"index": args.index}),
              ("splade", args.sparse, _sparse_options(args))]
    opened = []
    for name, path, options in wanted:
        if path:
            folder = open_index(path, "sparse" if name == "splade" else name)
            require(folder.modules(), f"search --{'sparse' if name == 'splade' else name}")  # before the line below
            print(f"opening {folder.path} ({name})", file=sys.stderr, flush=True)
            opened.append((name, folder.searcher(**options)))
    return opened


def _sparse_options(args: argparse.Namespace) -> dict[str, Any]:
    """The learned sparse searcher's options: the query model, where it runs, threads (and, for the organizers' SPLADE
    index, the query length)."""
    from ikatkit.artifact import open_index
    from ikatkit.index.manifest import SPARSE_HDF5

    if not args.sparse:
        return {}
    if open_index(args.sparse, "sparse").kind == SPARSE_HDF5:
        if args.allow_other_model:
            raise IkatError("--allow-other-model is for indexes whose manifest names a model",
                            where="--allow-other-model",
                            fix="leave it out: --sparse-model sets the organizers' index's query model")
        return {"model": args.sparse_model, "threads": args.threads, "device": args.device or "cpu",
                **({"max_length": args.sparse_max_length} if args.sparse_max_length else {})}
    if args.sparse_max_length:
        raise IkatError("--sparse-max-length is for the organizers' SPLADE index", where="--sparse-max-length",
                        fix="leave it out: an impact index's queries are cut as its encoder cuts them")
    return {"model": args.sparse_model, "threads": args.threads, "device": args.device,
            "other_model": args.allow_other_model}


def _fusion_weights(args: argparse.Namespace) -> list[float] | None:
    """The weighted fusion's weights of the lists searched (BM25, dense, sparse, in that order): ``--dense-weight``
    and ``--sparse-weight`` as named, the lists without one sharing what is left of 1 equally."""
    lists = {"--index": (args.index, None), "--dense": (args.dense, args.dense_weight),
             "--sparse": (args.sparse, args.sparse_weight)}
    for option, (path, weight) in lists.items():
        if weight is not None and not path:
            raise IkatError(f"{option}-weight without {option}", where=f"{option}-weight",
                            fix=f"add {option} DIR, or leave out {option}-weight")
        if weight is not None and not 0 <= weight <= 1:
            raise IkatError(f"{option}-weight {weight} is not in [0, 1]", where=f"{option}-weight",
                            fix="give a weight between 0 and 1")
    searched = [weight for path, weight in lists.values() if path]
    if args.fusion != "weighted" or len(searched) < 2:
        if any(w is not None for w in searched):
            raise IkatError("weights are for the weighted fusion of two or more lists",
                            where="--dense-weight/--sparse-weight", fix="search two or more of --index/--dense/"
                            "--sparse with --fusion weighted, or leave out the weights")
        return None
    left = 1 - sum(w for w in searched if w is not None)
    unnamed = searched.count(None)
    if left < -1e-9 or (left > 1e-9 and not unnamed):
        raise IkatError(f"the named weights sum to {1 - left:g}, not 1", where="--dense-weight/--sparse-weight",
                        fix="give weights that sum to 1, or leave one list's weight out (it takes what is left)")
    return [left / unnamed if w is None else w for w in searched]


def _add_rerank(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rerank", help="re-rank an existing run's top passages with a bi- or cross-encoder",
                       description="Re-rank each turn's top --depth passages of RUN against the turn's query and "
                                   "write them as a TREC run (passages below --depth are dropped). Texts come from "
                                   "the run where it carries them, else from --index.")
    p.add_argument("run", help="a run in any supported format")
    p.add_argument("--index", help="the Lucene index the run's passages come from (for their texts)")
    p.add_argument("--topics", help="topic JSON (needed for --queries raw|manual)")
    _ranker_arguments(p, "cross-encoder")
    depth = default(rerank_run, "depth")
    p.add_argument("--depth", type=int, default=depth, help=f"passages re-ranked per turn (default {depth})")
    p.add_argument("--out", required=True, help="TREC run file")
    p.add_argument("--run-name", help="default: the run's name + '-rerank'")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.index.texts import passage_texts
        from ikatkit.pipelines.queries import queries_for
        from ikatkit.rank import make_ranker
        from ikatkit.runs.io import read_run, write_run

        original = read_run(args.run)
        queries = queries_for(args.queries, args.topics)
        # the index's stored texts; without an index, none: the run must carry its texts
        texts = passage_texts(index=args.index, why="re-ranking") if args.index else (lambda ids: {})
        reranked = rerank_run(original, queries, make_ranker(args.kind, args.model), texts, args.depth, args.run_name)
        write_run(reranked, args.out, "trec")
        print(f"re-ranked the top {args.depth} passages of {len(reranked.turns)} turns -> {args.out}")
        return 0

    p.set_defaults(func=run)


def _add_ptkb(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ptkb", help="rank each turn's PTKB statements for a topic file (no pipeline)",
                       description="Rank every turn's PTKB statements (by default by the shipped classifier's "
                                   "probability, keeping those it chooses; or against the query with a bi- or "
                                   "cross-encoder) and write 'qid Q0 key rank score name' lines (evaluate them with "
                                   "`ikatkit eval FILE --qrels PTKB_QRELS --measures nDCG@5`).")
    p.add_argument("topics", help="topic JSON")
    _ranker_arguments(p, "bi-encoder")
    p.add_argument("--k", type=int, help="statements kept per turn (default: those the classifier chooses; with "
                                         "--classifier none, all)")
    p.add_argument("--history-turns", type=int, default=0,
                   help="add --history-weight x each statement's best score against the previous N queries")
    p.add_argument("--history-responses", type=int, default=0,
                   help="and against the previous N turns' canonical responses (the topics' response)")
    p.add_argument("--history-weight", type=float, default=default(RankPtkb, "history_weight"),
                   help="default: the rank_ptkb stage's, %(default)s")
    p.add_argument("--classifier", default=DEFAULT_MODEL,
                   help="rank by a PTKB classifier's probability and keep the statements it chooses (or its top "
                        "--k): a file of `ikatkit train-ptkb-classifier`, or the default %(default)s, the shipped "
                        "model (docs/ptkb-classification.md); none: rank by --kind/--model's scores (with --history-*)")
    p.add_argument("--qrels", help="PTKB qrels: also print nDCG@5, P@5, R@5 and AP")
    p.add_argument("--out", required=True, help="TREC-format ranking of PTKB keys")
    p.add_argument("--run-name", default="ptkb")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines.queries import queries_for
        from ikatkit.rank import make_ranker
        from ikatkit.rank.standalone import rank_topics_ptkb
        from ikatkit.runs.io import write_run
        from ikatkit.runs.model import ranking_run
        from ikatkit.topics import load_topics

        if args.classifier != "none" and (args.history_turns or args.history_responses):
            raise IkatError("--history-turns/--history-responses rank by the ranker's scores", where="--classifier",
                            fix="add --classifier none (the classifier reads the earlier turns itself)")
        if args.classifier != "none" and (args.kind, args.model) != (p.get_default("kind"), p.get_default("model")):
            raise IkatError("--kind/--model choose the ranker of --classifier none; a classifier brings its own",
                            where="--classifier", fix="add --classifier none, or leave out --kind/--model")
        topics = load_topics(args.topics)
        queries = queries_for(args.queries, args.topics)
        if args.classifier == "none":
            rankings = rank_topics_ptkb(topics, queries, make_ranker(args.kind, args.model), args.k,
                                        args.history_turns, args.history_weight,
                                        history_responses=args.history_responses)
        else:
            from ikatkit.rank.ptkb_model import PtkbModel, topic_choices, topic_turns

            model = PtkbModel.load(args.classifier)
            rankings = topic_choices(model, make_ranker(model.kind, model.model), topic_turns(topics, queries), args.k)
        run_type = "manual" if args.queries == "manual" else "automatic"
        write_run(ranking_run(args.run_name, run_type, rankings), args.out, "trec")
        print(f"ranked the PTKB statements of {len(rankings)} turns -> {args.out}")
        if args.qrels:
            from ikatkit.evaluate.ptkb import evaluate_ptkb

            result = evaluate_ptkb({q: dict(r) for q, r in rankings.items()}, args.qrels)
            print(", ".join(f"{m} {v:.4f}" for m, v in result.mean.items())
                  + f" over {len(result.evaluated)} judged turns")
        return 0

    p.set_defaults(func=run)
