"""``ikatkit run`` and ``ikatkit demo``: run a pipeline config over topics."""

from __future__ import annotations

import argparse


def add(sub: argparse._SubParsersAction) -> None:
    _add_run(sub)
    _add_demo(sub)


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="run a pipeline config over topics: official run + TREC run + manifest, validated",
        description="Run a pipeline config over topics. A config is a TOML file: name, run_type, [resources.*] "
                    "(kind = llm | bi-encoder | cross-encoder | bm25 | dense | sparse | partitioned-bm25 | texts) and "
                    "[[stages]] in order, each naming a stage and its options; see configs/demo.toml and "
                    "docs/configs.md; `ikatkit stages` lists the stages.")
    p.add_argument("config", help="a run config, e.g. configs/demo.toml")
    p.add_argument("--topics", required=True, help="topic JSON (the run's format follows the topics' year)")
    p.add_argument("--year", type=int, help="topic format year (detected when omitted)")
    p.add_argument("--index", help="Lucene index built by `ikatkit index build`")
    p.add_argument("--out", required=True, help="output folder (checkpoints make a killed run resumable)")
    p.add_argument("--queries", metavar="FILE",
                   help="own rewrites, 'qid<TAB>text' lines: a file_query stage reads them in place of the "
                        "config's query stage (raw_query, manual_query or rewrite)")
    p.add_argument("--conversations", nargs="+", help="only these conversations, e.g. 9-1 10-1")
    p.add_argument("--cache", help="cache folder: LLM outputs, embeddings, OpenVINO models, compiled Java helpers "
                                   "(default: $IKATKIT_CACHE, else .cache/ikatkit "
                                   "in a checkout, else ~/.cache/ikatkit)")
    p.add_argument("--restart", action="store_true", help="discard checkpoints in --out and start over")
    p.add_argument("--no-validate", action="store_true", help="skip validating the written run")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines import load_config, run_pipeline
        from ikatkit.pipelines.queries import use_query_file
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics, args.year)
        if args.conversations:
            topics = topics.subset(args.conversations)
        config = load_config(args.config)
        if args.queries:
            config = use_query_file(config, args.queries)
        outcome = run_pipeline(config, topics, args.out, index=args.index, cache_dir=args.cache,
                               validate=not args.no_validate, restart=args.restart,
                               fresh="use a new --out, or pass --restart to discard them")
        print(outcome.summary())
        return 0 if outcome.valid in (True, None) else 1

    p.set_defaults(func=run)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="index the embedded collection, run the demo pipeline, validate and evaluate it",
        description="Index the embedded demo collection (60 documents, 202 passages written for ikatkit), run a "
                    "pipeline config on its two demo conversations with the bundled models, validate the run and "
                    "evaluate it; then show one turn end to end. The bundled SmolLM2-135M only exercises the "
                    "plumbing: its rewrites and responses are weak, and the guards replace the degenerate ones.")
    p.add_argument("--config", help="pipeline config (default: the demo config the package ships, equal to "
                                     "configs/demo.toml)")
    p.add_argument("--out", default="runs/demo", help="output folder (index, run, evaluation)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines.config import load_config
        from ikatkit.pipelines.demo import demo_config, run_demo
        from ikatkit.pipelines.preflight import preflight

        config = args.config or demo_config()
        preflight(load_config(config))
        return run_demo(config, args.out)

    p.set_defaults(func=run)
