"""``ikatkit partition``: train M-RAG's agents (partition selection, memory refinement)."""

from __future__ import annotations

import argparse
import json

from ikatkit.commands import default
from ikatkit.errors import IkatError
from ikatkit.models import DEFAULT_ENCODER
from ikatkit.partition.selector import train_selector
from ikatkit.topics import QUERY_KINDS


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("partition", help="M-RAG agents: partition selection (Agent-S) and memory refinement (Agent-R)")
    psub = p.add_subparsers(dest="partition_command", required=True)
    t = psub.add_parser("train-selector", help="train Agent-S (DQN, reward nDCG@3) on judged turns; saves the policy")
    t.add_argument("partitions", help="folder of `ikatkit index partition`")
    t.add_argument("--topics", required=True, nargs="+", help="topic files of the training turns")
    t.add_argument("--qrels", help="TREC qrels of those turns")
    t.add_argument("--provenance", action="store_true",
                   help="turns the qrels lack: their response_provenance passages count as relevant (grade 2)")
    t.add_argument("--queries", choices=QUERY_KINDS, default="raw", help="raw or resolved utterances")
    t.add_argument("--model", default=DEFAULT_ENCODER, help="bi-encoder for the state's cosines")
    t.add_argument("--seed", type=int, default=default(train_selector, "seed"))
    t.add_argument("--episodes", type=int, default=default(train_selector, "episodes"))
    t.add_argument("--out", required=True, help="policy file (tied to these partitions' manifest)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.evaluate.qrels import load_qrels
        from ikatkit.partition.selector import judged_turns
        from ikatkit.rank import BiEncoder
        from ikatkit.topics import load_topics

        qrels = load_qrels(args.qrels) if args.qrels else None
        if qrels is None and not args.provenance:
            raise IkatError("no relevance to learn from", fix="pass --qrels and/or --provenance")
        queries: dict[str, str] = {}
        judged: dict[str, dict[str, int]] = {}
        for path in args.topics:
            topics = load_topics(path)
            queries.update(topics.queries(args.queries))
            judged.update(judged_turns(topics, qrels, args.provenance))
        encoder = BiEncoder(args.model)
        policy = train_selector(args.partitions, queries, judged, encoder.encode, args.out, seed=args.seed,
                                episodes=args.episodes)
        print(f"trained Agent-S on {len(policy.meta['turns'])} turns -> {args.out}")
        return 0

    t.set_defaults(func=run)
    r = psub.add_parser("train-refiner", help="train Agent-R's memory selector: the boosting loop against the "
                        "training turns' canonical responses; saves the selector")
    r.add_argument("config", help="a run config with refine_memory followed by respond (configs/rtg_mrag_agentr.toml)")
    r.add_argument("--topics", required=True, help="topics of the training turns (with canonical responses)")
    r.add_argument("--index", help="the index or partitions folder the config retrieves from")
    r.add_argument("--conversations", nargs="+", help="only these conversations")
    r.add_argument("--cache", help="cache folder (LLM outputs, embeddings), as for `ikatkit run`")
    r.add_argument("--out", required=True, help="selector file (tied to the stage's prompt, LLM and options)")

    def train_refiner(args: argparse.Namespace) -> int:
        from ikatkit.training.refiner import train_refiner as train

        selector = train(args.config, args.topics, args.out, index=args.index, cache_dir=args.cache,
                         conversations=args.conversations)
        print(json.dumps({"out": args.out, **{k: v for k, v in selector.meta.items() if k != "turns"},
                          "turns": len(selector.meta["turns"]), "weights": selector.weights, "bias": selector.bias}))
        return 0

    r.set_defaults(func=train_refiner)
