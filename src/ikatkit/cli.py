"""The ``ikatkit`` command: thin argument parsing over the same functions as the Python API.

Each subcommand is one ``_add_<name>`` function that registers its parser and sets ``func`` to a
handler returning the exit code. Heavy modules are imported inside the handlers, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from ikatkit import __version__
from ikatkit.errors import IkatError

Handler = Callable[[argparse.Namespace], int]


def _add_topics(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="summarise a topic file or print its queries")
    p.add_argument("topics", help="topic JSON of iKAT 2023, 2024 or 2025")
    p.add_argument("--year", type=int, help="format year (detected when omitted)")
    p.add_argument("--queries", choices=["raw", "manual"], help="print 'qid<TAB>text' lines of this kind")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics, args.year)
        if args.queries:
            for qid, text in topics.queries(args.queries).items():
                print(f"{qid}\t{text}")
            return 0
        print(json.dumps({"year": topics.year, "conversations": len(topics.conversations), "turns": len(topics),
                          "ptkb_statements": sum(len(c.ptkb) for c in topics.conversations)}, indent=2))
        return 0

    p.set_defaults(func=run)


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a pipeline config over topics: official run + TREC run + manifest, validated")
    p.add_argument("config", help="a run config, e.g. configs/demo.toml")
    p.add_argument("--topics", required=True, help="topic JSON (the run's format follows the topics' year)")
    p.add_argument("--year", type=int, help="topic format year (detected when omitted)")
    p.add_argument("--index", help="Lucene index built by `ikatkit index build`")
    p.add_argument("--out", required=True, help="output folder (checkpoints make a killed run resumable)")
    p.add_argument("--conversations", nargs="+", help="only these conversations, e.g. 9-1 10-1")
    p.add_argument("--cache", help="cache folder for LLM outputs (default $IKATKIT_CACHE or .cache/ikatkit)")
    p.add_argument("--restart", action="store_true", help="discard checkpoints in --out and start over")
    p.add_argument("--no-validate", action="store_true", help="skip validating the written run")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines import run_pipeline
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics, args.year)
        if args.conversations:
            topics = topics.subset(args.conversations)
        outcome = run_pipeline(args.config, topics, args.out, index=args.index, cache_dir=args.cache,
                               validate=not args.no_validate, restart=args.restart)
        print(outcome.summary())
        return 0 if outcome.valid in (True, None) else 1

    p.set_defaults(func=run)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="index the embedded collection, run the demo pipeline, validate and evaluate it")
    p.add_argument("--config", default="configs/demo.toml", help="pipeline config (default: configs/demo.toml)")
    p.add_argument("--out", default="runs/demo", help="output folder (index, run, evaluation)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines.demo import run_demo

        return run_demo(args.config, args.out)

    p.set_defaults(func=run)


def _add_eval(sub: argparse._SubParsersAction) -> None:
    for name, help_text in (("eval", "evaluate a run's passage ranking against qrels (ir-measures)"),
                            ("eval-ptkb", "evaluate a run's PTKB provenance ranking against PTKB qrels")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("run", help="official JSON/JSONL run, TREC run, or {qid: {docid: score}} JSON")
        p.add_argument("--qrels", required=True, help="TREC qrels (PTKB qrels for eval-ptkb)")
        p.add_argument("--measures", nargs="+", help="ir-measures names (default: the track's measures)")
        p.add_argument("--per-query", action="store_true", help="also print per-query values")
        p.add_argument("--missing", choices=["skip", "zero"], default="skip",
                       help="judged turns the run lacks: left out (as trec_eval) or counted as 0")
        p.add_argument("--format", choices=["tsv", "json"], default="tsv")
        p.add_argument("--out", help="write the result here instead of standard output")
        if name == "eval-ptkb":
            p.add_argument("--topics", help="topics file: maps PTKB statement texts (2025 runs) to keys")
        p.set_defaults(func=_run_eval, ptkb=name == "eval-ptkb")


def _run_eval(args: argparse.Namespace) -> int:
    from ikatkit.atomic import write_text
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.ptkb import evaluate_ptkb

    if args.ptkb:
        from ikatkit.runs.io import read_run
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics) if args.topics else None
        result = evaluate_ptkb(read_run(args.run, topics=topics), args.qrels, args.measures, missing=args.missing)
    else:
        result = evaluate(args.run, args.qrels, args.measures, missing=args.missing)
    text = (json.dumps(result.to_json(args.per_query), indent=2) + "\n" if args.format == "json"
            else result.to_tsv(args.per_query))
    if args.out:
        write_text(args.out, text)
    else:
        sys.stdout.write(text)
    print(f"{len(result.evaluated)} judged turns evaluated, {len(result.missing)} judged turns missing from the run",
          file=sys.stderr)
    return 0


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a run against the topics: the organizers' rules and more")
    p.add_argument("run", help="a run: official 2023/2024 JSON, 2025 JSONL, TREC, or {qid: {pid: score}} JSON")
    p.add_argument("--topics", required=True, help="the year's topic JSON")
    p.add_argument("--year", type=int, help="topic format year (detected when omitted)")
    ids = p.add_mutually_exclusive_group()
    ids.add_argument("--index", help="check that every passage exists in this Lucene index")
    ids.add_argument("--ids", help="... or in this id file (one id per line) or hash file (doc_id<TAB>n<TAB>md5)")
    p.add_argument("--max-warnings", type=lambda v: v if v == "official" else int(v),
                   help="fail above this many warnings; 'official' = the organizers' limit (25 in 2023, 2000 in 2024)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.runs.validate import validate_run
        from ikatkit.topics import load_topics

        report = validate_run(args.run, load_topics(args.topics, args.year), ids=args.index or args.ids,
                              max_warnings=args.max_warnings)
        print(report)
        return 0 if report.ok else 1

    p.set_defaults(func=run)


def _add_convert(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert a run between the 2023/2024 JSON, 2025 JSONL and TREC formats")
    p.add_argument("run", help="a run in any supported format")
    p.add_argument("--to", required=True, choices=["2023", "2024", "2025", "trec"])
    p.add_argument("--out", required=True, help="output file")
    p.add_argument("--topics", help="topics, to fill PTKB statement texts/keys the target format needs")
    p.add_argument("--team-id", help="team id (2025 metadata)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.runs.io import read_run, write_run
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics) if args.topics else None
        converted = read_run(args.run, topics=topics)
        converted.year = int(args.to) if args.to != "trec" else converted.year
        if args.team_id:
            converted.team_id = args.team_id
        write_run(converted, args.out, args.to, topics=topics)
        print(f"wrote {len(converted.turns)} turns as {args.to} to {args.out}")
        return 0

    p.set_defaults(func=run)


def _add_index(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build a Lucene BM25 index, show its stats, look up a passage")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="index a collection (ClueWeb22 records are segmented the iKAT way)")
    b.add_argument("inputs", nargs="+", help="collection files or folders")
    b.add_argument("--out", required=True, help="index folder (re-running on a finished index does nothing)")
    b.add_argument("--format", default="auto", choices=["auto", "clueweb22", "jsonl", "trecweb", "car", "msmarco"])
    b.add_argument("--threads", type=int, help="Anserini indexing threads (default: CPU cores, at most 8)")
    b.add_argument("--segmenter", default="auto", choices=["auto", "java", "python"],
                   help="who segments ClueWeb22 records: Anserini's indexing threads (java: our collection class, "
                        "rule splitter, needs a JDK's javac) or Python processes feeding them (python: any format "
                        "and splitter, one file can feed every thread); auto = java when it can and there are at "
                        "least as many files as threads")
    b.add_argument("--shards", type=int,
                   help="Python segmenter processes, each feeding one Anserini thread through a named pipe "
                        "(default and at most: threads; at most one per input file)")
    b.add_argument("--splitter", default="auto", choices=["auto", "spacy", "rule"],
                   help="sentence splitter for ClueWeb22 records (official ids need spaCy en_core_web_sm)")
    b.add_argument("--heap", default="4g", help="Java heap for Anserini")
    pt = isub.add_parser("partition", help="split an index or collection into M Lucene indexes (M-RAG partitions)")
    pt.add_argument("source", help="an index of `index build`, or collection files/folder (read as `index build` does)")
    pt.add_argument("--strategy", required=True, choices=["random", "cluster", "graph", "category"],
                    help="random: LSH over MiniLM embeddings; cluster: k-means (faiss); graph: spectral clustering "
                         "of the kNN graph; category: a record field (--field)")
    pt.add_argument("--partitions", type=int, required=True, help="M, the number of partitions")
    pt.add_argument("--out", required=True, help="folder of part-NNN indexes and partitions.json (resumable)")
    pt.add_argument("--seed", type=int, default=0)
    pt.add_argument("--field", help="category strategy: the record field (url: the URL's host)")
    pt.add_argument("--pattern", help="category strategy: a regex whose first group is the category, "
                                      "e.g. --field id --pattern '^clueweb22-(en\\d+)'")
    pt.add_argument("--format", default="auto", choices=["auto", "clueweb22", "jsonl", "trecweb", "car", "msmarco"])
    pt.add_argument("--splitter", default="auto", choices=["auto", "spacy", "rule"])
    pt.add_argument("--model", default="bundled:minilm", help="sentence-transformers embedding model")
    pt.add_argument("--threads", type=int, help="Anserini threads per partition index")
    s = isub.add_parser("stats", help="the index manifest and Lucene's counts")
    s.add_argument("index")
    g = isub.add_parser("get", help="print a passage's stored text")
    g.add_argument("index")
    g.add_argument("pid", help="passage id, e.g. clueweb22-en0000-00-00000:0")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.index import lookup
        from ikatkit.index.build import build_index

        if args.index_command == "build":
            build_index(args.inputs, args.out, fmt=args.format, threads=args.threads, shards=args.shards,
                        splitter=args.splitter, heap=args.heap, segmenter=args.segmenter)
        elif args.index_command == "partition":
            from ikatkit.partition.build import partition_index

            partition_index(args.source, args.out, args.strategy, args.partitions, seed=args.seed, field=args.field,
                            pattern=args.pattern, fmt=args.format, splitter=args.splitter, model=args.model,
                            threads=args.threads)
        elif args.index_command == "stats":
            print(json.dumps(lookup.stats(args.index), indent=2))
        else:
            text = lookup.doc(args.index, args.pid)
            if text is None:
                print(f"ikatkit: {args.pid} is not in {args.index}", file=sys.stderr)
                return 1
            print(text)
        return 0

    p.set_defaults(func=run)


def _add_search(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="BM25 (+RM3) search of the topics' queries; writes a TREC run")
    p.add_argument("--index", required=True)
    p.add_argument("--topics", required=True)
    p.add_argument("--queries", choices=["raw", "manual"], default="manual", help="raw or resolved utterances")
    p.add_argument("--k", type=int, default=1000)
    p.add_argument("--k1", type=float, default=0.9)
    p.add_argument("--b", type=float, default=0.4)
    p.add_argument("--rm3", action="store_true", help="RM3 expansion (fb_terms 10, fb_docs 10, weight 0.5)")
    p.add_argument("--out", required=True, help="TREC run file")
    p.add_argument("--run-name", default="bm25")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.retrieve.bm25 import Bm25Searcher
        from ikatkit.runs.io import write_run
        from ikatkit.runs.model import PassageRef, Response, Run, TurnResult
        from ikatkit.topics import load_topics

        queries = load_topics(args.topics).queries(args.queries)
        searcher = Bm25Searcher(args.index, args.k1, args.b, rm3={} if args.rm3 else None)
        hits = searcher.batch_search(queries, args.k)
        run_ = Run(args.run_name, "manual" if args.queries == "manual" else "automatic",
                   [TurnResult(q, [Response(1, "", [PassageRef(h.docid, h.score) for h in hits[q]])]) for q in queries])
        write_run(run_, args.out, "trec")
        print(f"wrote {sum(map(len, hits.values()))} hits for {len(queries)} queries to {args.out}")
        return 0

    p.set_defaults(func=run)


def _add_compare(sub: argparse._SubParsersAction) -> None:
    for name, help_text in (("compare", "compare runs: measures, paired significance, wins/ties/losses, plots"),
                            ("report", "one self-contained HTML report comparing runs (e.g. manual vs automatic)")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("runs", nargs="+", help="runs in any supported format; NAME=PATH sets the name")
        p.add_argument("--qrels", required=True)
        p.add_argument("--ptkb-qrels", help="also compare the runs' PTKB rankings")
        p.add_argument("--topics", help="topics file: maps PTKB statement texts (2025 runs) to keys")
        p.add_argument("--baseline", help="the run the others are tested against (default: the first)")
        p.add_argument("--measures", nargs="+", help="ir-measures names (default: the track's measures)")
        p.add_argument("--test", choices=["ttest", "wilcoxon", "randomization"], default="ttest")
        p.add_argument("--correction", choices=["holm", "bonferroni", "none"], default="holm")
        p.add_argument("--missing", choices=["skip", "zero"], default="skip",
                       help="judged turns a run lacks: skip them (trec_eval) or score them 0")
        p.add_argument("--out", required=name == "report", help="folder for tables, plots (and the report)")
        p.set_defaults(func=_run_compare, report=name == "report")


def _run_compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ikatkit.evaluate.compare import compare_ptkb, compare_runs
    from ikatkit.evaluate.report import write_comparison, write_report
    from ikatkit.topics import load_topics

    runs = dict(r.split("=", 1) if "=" in r else (Path(r).stem, r) for r in args.runs)
    baseline = args.baseline if args.baseline in runs or args.baseline is None else Path(args.baseline).stem
    topics = load_topics(args.topics) if args.topics else None
    options = {"baseline": baseline, "measures": args.measures, "test": args.test, "correction": args.correction,
               "missing": args.missing}
    if args.report:
        path = write_report(runs, args.qrels, Path(args.out), ptkb_qrels=args.ptkb_qrels, topics=topics,
                            **options)
        print(f"report: {path}")
        return 0
    comparisons = {"": compare_runs(runs, args.qrels, **options)}
    if args.ptkb_qrels:
        comparisons["ptkb_"] = compare_ptkb(runs, args.ptkb_qrels, topics, **{**options, "measures": None})
    for prefix, comparison in comparisons.items():
        print(("PTKB statement ranking\n" if prefix else "") + comparison.to_markdown() + "\n")
        if args.out:
            files = write_comparison(comparison, Path(args.out), prefix=prefix)
            print(f"tables and plots in {args.out}: " + ", ".join(
                Path(str(f)).name for f in [files["csv"], files["latex"], files["per_turn"],
                                            files["per_conversation"], *files["plots"]]) + "\n")
    return 0


def _add_finetune(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("finetune", help="LoRA/QLoRA fine-tuning on training topics; rewrite evaluation")
    fsub = p.add_subparsers(dest="finetune_command", required=True)
    t = fsub.add_parser("train", help="train a LoRA adapter (QLoRA with a GPU) on supervised examples from topics")
    t.add_argument("--topics", required=True, help="training topics")
    t.add_argument("--passages", nargs="*", default=[], help="provenance passage texts (JSONL), for response examples")
    t.add_argument("--task", choices=["rewrite", "response", "both"], default="both")
    t.add_argument("--out", required=True, help="adapter folder (load it with adapter = DIR in an llm resource)")
    from ikatkit.finetune.train import TrainSettings

    defaults = TrainSettings()
    for name in ("model", "steps", "batch_size", "micro_batch", "lr", "r", "alpha", "dropout", "max_length", "seed"):
        value = getattr(defaults, name)
        t.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value, help=f"default {value}")
    e = fsub.add_parser("eval", help="ROUGE-L and exact match of LLM rewrites against resolved utterances")
    e.add_argument("--topics", required=True)
    e.add_argument("--model", default="bundled:smollm2")
    e.add_argument("--adapter", help="a LoRA adapter folder")
    e.add_argument("--conversations", nargs="+", help="only these conversations")
    e.add_argument("--max-new-tokens", type=int, default=64)

    def run(args: argparse.Namespace) -> int:
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics)
        if args.finetune_command == "eval":
            from ikatkit.finetune.rewrite_eval import evaluate_rewrites
            from ikatkit.llm import make_llm

            if args.conversations:
                topics = topics.subset(args.conversations)
            llm = make_llm({"backend": "transformers", "model": args.model, "adapter": args.adapter,
                            "max_new_tokens": args.max_new_tokens})
            print(json.dumps(evaluate_rewrites(llm, topics), indent=2))
            return 0
        from ikatkit.finetune.data import load_passage_texts, response_examples, rewrite_examples
        from ikatkit.finetune.train import TrainSettings, train_lora

        examples = rewrite_examples(topics) if args.task in ("rewrite", "both") else []
        if args.task in ("response", "both"):
            examples += response_examples(topics, load_passage_texts(args.passages))
        settings = TrainSettings(**{k: getattr(args, k) for k in TrainSettings.__dataclass_fields__})
        train_lora(examples, args.out, settings)
        return 0

    p.set_defaults(func=run)


def _add_partition(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("partition", help="M-RAG partition selection (Agent-S) over `index partition` partitions")
    psub = p.add_subparsers(dest="partition_command", required=True)
    t = psub.add_parser("train-selector", help="train Agent-S (DQN, reward nDCG@3) on judged turns; saves the policy")
    t.add_argument("partitions", help="folder of `ikatkit index partition`")
    t.add_argument("--topics", required=True, nargs="+", help="topic files of the training turns")
    t.add_argument("--qrels", help="TREC qrels of those turns")
    t.add_argument("--provenance", action="store_true",
                   help="turns the qrels lack: their response_provenance passages count as relevant (grade 2)")
    t.add_argument("--queries", choices=["raw", "manual"], default="raw", help="raw or resolved utterances")
    t.add_argument("--model", default="bundled:minilm", help="bi-encoder for the state's cosines")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--episodes", type=int, default=20000)
    t.add_argument("--out", required=True, help="policy file (tied to these partitions' manifest)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.evaluate.qrels import load_qrels
        from ikatkit.partition.selector import judged_turns, train_selector
        from ikatkit.rank import make_ranker
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
        encoder = make_ranker("bi-encoder", args.model)
        policy = train_selector(args.partitions, queries, judged, encoder.encode, args.out, seed=args.seed,
                                episodes=args.episodes)
        print(f"trained Agent-S on {len(policy.meta['turns'])} turns -> {args.out}")
        return 0

    p.set_defaults(func=run)


COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_topics, _add_validate, _add_convert, _add_eval, _add_compare, _add_index, _add_search, _add_run, _add_finetune, _add_partition,
                                                             _add_demo]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ikatkit", description="TREC iKAT toolkit: topics, indexes, pipelines, runs, validation, evaluation.")
    parser.add_argument("--version", action="version", version=f"ikatkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except IkatError as err:
        print(f"ikatkit: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
