"""The ``ikatkit`` command: thin argument parsing over the same functions as the Python API.

Each subcommand is one ``_add_<name>`` function that registers its parser and sets ``func`` to a
handler returning the exit code. Heavy modules are imported inside the handlers, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ikatkit import __version__
from ikatkit.collection.readers import FORMATS
from ikatkit.errors import IkatError

if TYPE_CHECKING:
    from ikatkit.topics import Topics

Handler = Callable[[argparse.Namespace], int]


def _add_topics(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="summarise a topic file, print its queries or write its PTKB qrels")
    p.add_argument("topics", help="topic JSON of iKAT 2023, 2024 or 2025")
    p.add_argument("--year", type=int, help="format year (detected when omitted)")
    p.add_argument("--queries", choices=["raw", "manual"], help="print 'qid<TAB>text' lines of this kind")
    p.add_argument("--ptkb-qrels", metavar="OUT",
                   help="write PTKB qrels from the topics' ptkb_provenance (for every turn citing statements: "
                        "each statement 1 if cited, else 0; 2024 and 2025 ship no separate PTKB qrels)")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics, args.year)
        if args.ptkb_qrels:
            return _write_ptkb_qrels(topics, args.ptkb_qrels)
        if args.queries:
            for qid, text in topics.queries(args.queries).items():
                print(f"{qid}\t{text}")
            return 0
        print(json.dumps({"year": topics.year, "conversations": len(topics.conversations), "turns": len(topics),
                          "ptkb_statements": sum(len(c.ptkb) for c in topics.conversations)}, indent=2))
        return 0

    p.set_defaults(func=run)


def _write_ptkb_qrels(topics: Topics, out: str) -> int:
    from ikatkit.evaluate.qrels import write_qrels

    qrels = topics.ptkb_qrels()
    if not qrels:
        raise IkatError("no turn of the topics cites PTKB statements (ptkb_provenance)", path=topics.path,
                        fix="PTKB qrels come from topics with ground truth (released after judging)")
    write_qrels(qrels, out)
    print(f"wrote {sum(map(len, qrels.values()))} PTKB judgements for {len(qrels)} turns to {out}")
    return 0


def _add_run(sub: argparse._SubParsersAction) -> None:
    from ikatkit.pipelines.stages import STAGES

    p = sub.add_parser(
        "run", help="run a pipeline config over topics: official run + TREC run + manifest, validated",
        description="Run a pipeline config over topics. A config is a TOML file: name, run_type, [resources.*] "
                    "(kind = llm | bm25 | bi-encoder | cross-encoder) and [[stages]] in order, each naming a stage "
                    "and its options; see configs/demo.toml and the README's 'Run configs'. Stages: "
                    + ", ".join(STAGES) + ".")
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
                                   "(default $IKATKIT_CACHE or .cache/ikatkit)")
    p.add_argument("--restart", action="store_true", help="discard checkpoints in --out and start over")
    p.add_argument("--no-validate", action="store_true", help="skip validating the written run")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines import load_config, run_pipeline
        from ikatkit.pipelines.queries import use_query_file
        from ikatkit.topics import load_topics

        if args.cache:  # everything cached on the way (Java helpers, OpenVINO models) follows it, as $IKATKIT_CACHE
            os.environ["IKATKIT_CACHE"] = str(Path(args.cache).resolve())
        topics = load_topics(args.topics, args.year)
        if args.conversations:
            topics = topics.subset(args.conversations)
        config = load_config(args.config)
        if args.queries:
            config = use_query_file(config, args.queries)
        outcome = run_pipeline(config, topics, args.out, index=args.index, cache_dir=args.cache,
                               validate=not args.no_validate, restart=args.restart)
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
        scores = "{qid: {ptkb_key: score}}" if name == "eval-ptkb" else "{qid: {docid: score}}"
        p.add_argument("run", help=f"official JSON/JSONL run, TREC run, or {scores} JSON")
        p.add_argument("--qrels", required=True, help="TREC qrels (PTKB qrels for eval-ptkb)")
        p.add_argument("--measures", nargs="+", help="ir-measures names (default: the track's measures)")
        p.add_argument("--per-query", action="store_true", help="also print per-query values")
        p.add_argument("--missing", choices=["skip", "zero"], default="skip",
                       help="judged turns the run lacks: left out (as trec_eval) or counted as 0")
        p.add_argument("--format", choices=["tsv", "json"], default="tsv",
                       help="tsv: 'measure<TAB>all<TAB>value' lines (with --per-query also one line per turn: "
                            "'measure<TAB>qid<TAB>value'); json: {mean, evaluated, missing[, per_query]}")
        p.add_argument("--out", help="write the result here instead of standard output")
        if name == "eval-ptkb":
            p.add_argument("--topics", help="topics file: maps PTKB statement texts (2025 runs) to keys")
        p.set_defaults(func=_run_eval, ptkb=name == "eval-ptkb")


def _run_eval(args: argparse.Namespace) -> int:
    from ikatkit.atomic import write_text
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.ptkb import evaluate_ptkb

    if args.ptkb:
        from ikatkit.runs.io import load_records, read_run
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics) if args.topics else None
        run = read_run(args.run, topics=topics)
        if load_records(args.run)[0] == "dict":  # {qid: {ptkb_key: score}}: the keys are PTKB keys
            run = {t.turn_id: dict(t.ranking()) for t in run.turns}
        result = evaluate_ptkb(run, args.qrels, args.measures, missing=args.missing)
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


def _add_response_inputs(p: argparse.ArgumentParser) -> None:
    """The inputs of response measures, shared by eval-responses, compare and report."""
    p.add_argument("--references", help="reference responses: {turn: text}, the 2024 gold-response JSON or topics "
                                        "(default: the topics' canonical responses)")
    p.add_argument("--nuggets", help="gold-nugget JSON {turn: {\"[i]\": {\"text\", \"relevance\"}}}, or a gold-response "
                   "JSON (the atomic nuggets each response lists, ungraded)")
    grounding = p.add_mutually_exclusive_group()
    grounding.add_argument("--passages", help="passage texts (JSONL) of the responses' used passages")
    grounding.add_argument("--index", help="... or the Lucene index to look them up in")
    p.add_argument("--matcher", choices=["embedding", "llm"], default="embedding",
                   help="nugget matcher: MiniLM cosine (default) or an LLM judge (--llm-config)")
    p.add_argument("--threshold", type=float, help="cosine threshold of the embedding nugget matcher (default 0.77, tuned: bench/tune_nugget_threshold.py)")
    p.add_argument("--llm-config", help="TOML or JSON of the judge LLM, as an llm resource: backend, model, base_url ...")
    p.add_argument("--bertscore-model", default="bundled:minilm", help="BERTScore model (hub id, folder or bundled:*)")
    p.add_argument("--bertscore-layer", type=int, help="BERTScore layer (default: bert-score's, else the last)")
    p.add_argument("--cache", help="cache folder for LLM outputs (default $IKATKIT_CACHE or .cache/ikatkit)")


def _response_options(args: argparse.Namespace) -> dict:
    """evaluate_response_runs keyword arguments from the shared response options."""
    from ikatkit.evaluate.responses.evaluate import ResponseScorers
    from ikatkit.evaluate.responses.nuggets import DEFAULT_THRESHOLD, LlmMatcher
    from ikatkit.topics import load_topics

    scorers = ResponseScorers(bert_model=args.bertscore_model, bert_layer=args.bertscore_layer,
                              nugget_threshold=DEFAULT_THRESHOLD if args.threshold is None else args.threshold)
    if args.matcher == "llm":
        if not args.llm_config:
            raise IkatError("the LLM matcher needs --llm-config", where="--matcher llm",
                            fix="pass a TOML/JSON file with backend and model (e.g. backend = \"openai\", base_url)")
        from pathlib import Path

        from ikatkit.llm import make_llm
        from ikatkit.paths import cache_root

        config = _read_config(args.llm_config)
        config.setdefault("cache_dir", str(Path(args.cache) if args.cache else cache_root()))
        scorers.matcher = LlmMatcher(make_llm(config))
    return {"topics": load_topics(args.topics) if args.topics else None, "references": args.references,
            "nuggets": args.nuggets, "passages": args.passages, "index": args.index, "scorers": scorers}


def _read_config(path: str) -> dict:
    from pathlib import Path

    text = Path(path).read_text(encoding="utf-8") if Path(path).is_file() else None
    if text is None:
        raise IkatError("LLM config not found", path=path, fix="pass a TOML or JSON file")
    try:
        if path.endswith(".json"):
            return dict(json.loads(text))
        import tomllib

        data = tomllib.loads(text)
        return dict(data.get("llm", data))
    except (ValueError, TypeError) as err:
        raise IkatError(f"cannot read the LLM config: {err}", path=path, fix="TOML (backend, model, ...) or JSON") from None


def _add_eval_responses(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval-responses", help="evaluate runs' responses: reference, grounding and nugget measures")
    p.add_argument("runs", nargs="+", help="runs in any supported format, or the 2024 participant-/gold-response "
                                           "JSON (one run per run id); NAME=PATH names a single run")
    p.add_argument("--topics", help="topics: the turns that exist and their canonical responses (references)")
    _add_response_inputs(p)
    p.add_argument("--measures", nargs="+", help="response measures (default: all the given inputs allow); see README")
    p.add_argument("--per-query", action="store_true", help="also print per-turn values")
    p.add_argument("--missing", choices=["skip", "zero"], default="skip",
                   help="turns with a reference or nuggets the run lacks: listed, or scored as an empty response")
    p.add_argument("--format", choices=["tsv", "json"], default="tsv")
    p.add_argument("--out", help="write the result here instead of standard output")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.atomic import write_text
        from ikatkit.evaluate.responses.evaluate import evaluate_response_runs

        options = _response_options(args)
        runs = _response_runs(args.runs, options["topics"])
        results = evaluate_response_runs(runs, measures=args.measures, missing=args.missing, **options)
        if args.format == "json":
            text = json.dumps({name: r.to_json(args.per_query) for name, r in results.items()}, indent=2) + "\n"
        else:
            text = "".join(f"{name}\t" + line + "\n" for name, r in results.items()
                           for line in r.to_tsv(args.per_query).splitlines())
        if args.out:
            write_text(args.out, text)
        else:
            sys.stdout.write(text)
        for name, r in results.items():
            extra = "".join(f"; {w}" for w in r.info.get("warnings", []))
            without = r.info.get("turns_without_nuggets")
            if without:
                extra += f"; {len(without)} turns without nuggets (no nugget measures): {', '.join(without[:5])}"
            print(f"{name}: {len(r.evaluated)} turns evaluated, {len(r.missing)} turns missing{extra}", file=sys.stderr)
        return 0

    p.set_defaults(func=run)


def _response_runs(paths: list[str], topics) -> list:  # type: ignore[no-untyped-def]
    """ResponseRuns from run files (NAME=PATH renames a file holding one run); names must be distinct."""
    from ikatkit.evaluate.responses.data import ResponseRun, read_response_runs

    runs: list = []
    for item in paths:
        name, _, path = item.rpartition("=") if "=" in item else ("", "", item)
        found = read_response_runs(path, topics)
        if name and len(found) == 1:
            found = [ResponseRun(name, found[0].responses, found[0].used)]
        runs += found
    names = [r.name for r in runs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise IkatError(f"runs named {repeated} more than once", where="RUN...", fix="name them NAME=PATH")
    return runs


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a run against the topics: the organizers' rules and more")
    p.add_argument("run", help="a run: official 2023/2024 JSON, 2025 JSONL, TREC, or {qid: {pid: score}} JSON")
    p.add_argument("--topics", required=True, help="the year's topic JSON")
    p.add_argument("--year", type=int, help="topic format year (detected when omitted)")
    ids = p.add_mutually_exclusive_group()
    ids.add_argument("--index", help="check that every passage exists in this Lucene index")
    ids.add_argument("--ids", help="... or in this id file (one id per line) or hash file (doc_id<TAB>n<TAB>md5)")
    p.add_argument("--max-warnings", type=lambda v: v if v == "official" else int(v),
                   help="fail above this many warnings; 'official' = the organizers' limit (2000 in 2023 and 2024)")

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
    from ikatkit.commands import index_verify

    p = sub.add_parser("index", help="build a Lucene BM25 index, show its stats, look up a passage")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="index a collection (ClueWeb22 records are segmented the iKAT way)")
    b.add_argument("inputs", nargs="+", help="collection files or folders")
    b.add_argument("--out", required=True, help="index folder (re-running on a finished index does nothing)")
    b.add_argument("--format", default="auto", choices=["auto", *FORMATS],
                   help="auto detects it from the first record: clueweb22 (raw records, segmented), jsonl (id, "
                        "contents), provenance (the organizers' doc_id, passage_id, passage_text), trecweb, car, "
                        "msmarco (id<TAB>text)")
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
    d = isub.add_parser("dense", help="encode a Lucene index's passages (or a collection) on Ray, index them with faiss",
                        description="Passages are read as `index build` reads them (or from a Lucene index's stored "
                                    "texts), embedded by Ray Data actors into float16 shards (a killed job resumes "
                                    "with the shards not yet finished), then indexed by faiss.")
    d.add_argument("inputs", nargs="+", help="a Lucene index of `index build`, or collection files or folders")
    d.add_argument("--out", required=True, help="dense index folder (re-running a finished one does nothing)")
    d.add_argument("--model", default="bundled:minilm",
                   help="sentence-transformers model: bundled:minilm (all-MiniLM-L6-v2), a folder or a hub id in the "
                        "local Hugging Face cache")
    d.add_argument("--ray", help="auto or HOST:PORT to join a running Ray cluster (default: a local Ray on this "
                                 "machine's cores)")
    d.add_argument("--batch-size", type=int, default=32, help="passages per forward pass")
    d.add_argument("--faiss", default="auto",
                   help="faiss index_factory spec: Flat, HNSW32, IVF32768,PQ48, ... (auto: Flat up to 1M passages, "
                        "else IVF with ~4 sqrt(n) lists and PQ of dimension/8 bytes, trained on up to 1M sampled "
                        "vectors); a new spec on a finished index re-indexes its embeddings")
    d.add_argument("--backend", default="auto", choices=["auto", "torch", "openvino"],
                   help="auto: OpenVINO on CPU workers (about 2x PyTorch there), PyTorch on GPUs")
    d.add_argument("--threads", type=int, default=1, help="CPU threads per encoder worker")
    d.add_argument("--workers", type=int, help="encoder workers (default: one per GPU of the cluster, else one per "
                                               "--threads CPUs)")
    d.add_argument("--shard-size", type=int, default=100_000, help="passages per shard, the unit of resuming")
    d.add_argument("--format", default="auto", choices=["auto", "clueweb22", "jsonl", "trecweb", "car", "msmarco"])
    d.add_argument("--splitter", default="auto", choices=["auto", "spacy", "rule"])
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
    s = isub.add_parser("stats", help="what an index holds: its manifest (own index), what Lucene shows (any index)")
    s.add_argument("index")
    g = isub.add_parser("get", help="print a passage's stored text")
    g.add_argument("index")
    g.add_argument("pid", help="passage id, e.g. clueweb22-en0000-00-00000:0")
    index_verify.add(isub)

    def run(args: argparse.Namespace) -> int:
        from ikatkit.index import lookup
        from ikatkit.index.build import build_index

        if args.index_command == "dense":
            from tqdm import tqdm

            from ikatkit.index.dense import build_dense

            with tqdm(desc="encoded", unit="psg") as bar:
                manifest = build_dense(args.inputs, args.out, model=args.model, ray_address=args.ray,
                                       batch_size=args.batch_size, faiss_spec=args.faiss, backend=args.backend,
                                       shard_size=args.shard_size, threads=args.threads, workers=args.workers,
                                       fmt=args.format,
                                       splitter=args.splitter, progress=bar.update)
            print(f"dense index of {manifest['counts']['passages']} passages ({manifest['model']}, "
                  f"{manifest['dimension']} dims, faiss {manifest['faiss']}) -> {args.out}")
        elif args.index_command == "build":
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
    p = sub.add_parser("search", help="BM25 (+RM3), dense or hybrid search of the topics' queries or a query file; "
                                       "writes a TREC run")
    p.add_argument("--index", help="Lucene index (BM25)")
    p.add_argument("--dense", help="dense index of `ikatkit index dense`; with --index: hybrid, fused by --fusion")
    p.add_argument("--fusion", choices=["rrf", "weighted"], default="rrf",
                   help="hybrid: reciprocal rank fusion (k=60) or min-max normalised scores, weighted")
    p.add_argument("--dense-weight", type=float, default=0.5, help="weighted fusion: dense's weight (BM25: 1 - it)")
    p.add_argument("--topics", help="topic JSON (needed for --queries raw|manual)")
    p.add_argument("--queries", default="manual", metavar="raw|manual|FILE",
                   help="raw or resolved utterances of --topics, or a file of 'qid<TAB>text' lines (own rewrites)")
    p.add_argument("--k", type=int, default=1000)
    p.add_argument("--k1", type=float, default=0.9)
    p.add_argument("--b", type=float, default=0.4)
    p.add_argument("--rm3", action="store_true", help="RM3 expansion (fb_terms 10, fb_docs 10, weight 0.5)")
    p.add_argument("--out", required=True, help="TREC run file")
    p.add_argument("--run-name", default="bm25")
    p.add_argument("--run-type", choices=["automatic", "manual"],
                   help="default: manual for --queries manual, else automatic")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines.queries import queries_for
        from ikatkit.retrieve.bm25 import Bm25Searcher, Hit
        from ikatkit.runs.io import write_run
        from ikatkit.runs.model import PassageRef, Response, Run, TurnResult

        if not args.index and not args.dense:
            raise IkatError("nothing to search", fix="pass --index (BM25), --dense (dense) or both (hybrid)")
        queries = queries_for(args.queries, args.topics)
        found = []
        if args.index:
            found.append(Bm25Searcher(args.index, args.k1, args.b, rm3={} if args.rm3 else None)
                         .batch_search(queries, args.k))
        if args.dense:
            from ikatkit.retrieve.dense import DenseSearcher

            found.append(DenseSearcher(args.dense, args.index).batch_search(queries, args.k))
        hits = found[0]
        if len(found) == 2:
            from ikatkit.retrieve import fusion

            weights = [1 - args.dense_weight, args.dense_weight]
            hits = {q: [Hit(pid, score) for pid, score in (
                fusion.rrf([found[0][q], found[1][q]], args.k) if args.fusion == "rrf"
                else fusion.weighted([found[0][q], found[1][q]], args.k, weights))] for q in queries}
        run_type = args.run_type or ("manual" if args.queries == "manual" else "automatic")
        run_ = Run(args.run_name, run_type,
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
        p.add_argument("--qrels", help="passage qrels (ranking measures); leave out to compare responses only")
        p.add_argument("--ptkb-qrels", help="also compare the runs' PTKB rankings")
        p.add_argument("--topics", help="topics file: maps PTKB statement texts (2025 runs) to keys; its canonical "
                                        "responses are the references of response measures")
        p.add_argument("--baseline", help="the run the others are tested against (default: the first)")
        p.add_argument("--measures", nargs="+", help="ir-measures names (default: the track's measures) and response "
                                                     "measures (ROUGE-L, NuggetRecall ...: compared as a second table)")
        p.add_argument("--test", choices=["ttest", "wilcoxon", "randomization"], default="ttest")
        p.add_argument("--correction", choices=["holm", "bonferroni", "none"], default="holm")
        p.add_argument("--missing", choices=["skip", "zero"], default="skip",
                       help="judged turns a run lacks: skip them (trec_eval) or score them 0")
        p.add_argument("--all-pairs", action="store_true",
                       help="also test every pair of runs (corrected over all pairs and measures)")
        p.add_argument("--out", required=name == "report", help="folder for tables, plots (and the report)")
        _add_response_inputs(p)
        p.set_defaults(func=_run_compare, report=name == "report")


def _run_compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ikatkit.evaluate.compare import compare_ptkb, compare_responses, compare_runs
    from ikatkit.evaluate.report import write_comparison, write_report
    from ikatkit.evaluate.responses.measures import is_response_measure
    from ikatkit.topics import load_topics

    runs = dict(r.split("=", 1) if "=" in r else (Path(r).stem, r) for r in args.runs)
    baseline = args.baseline if args.baseline in runs or args.baseline is None else Path(args.baseline).stem
    topics = load_topics(args.topics) if args.topics else None
    ranking_measures = [m for m in args.measures or [] if not is_response_measure(m)]
    response_measures = [m for m in args.measures or [] if is_response_measure(m)]
    if ranking_measures and not args.qrels:
        raise IkatError(f"ranking measures {ranking_measures} need --qrels", fix="pass --qrels or only response measures")
    if not args.qrels and not (response_measures or args.nuggets or args.references or topics):
        raise IkatError("nothing to compare", where="compare",
                        fix="pass --qrels (rankings) and/or response inputs (--topics, --references, --nuggets)")
    responses = None
    if response_measures or args.nuggets or args.references or not args.qrels:
        response_options = _response_options(args)
        responses = compare_responses(_response_runs(args.runs, topics), baseline=baseline,
                                      measures=response_measures or None, test=args.test,
                                      correction=args.correction, missing=args.missing, all_pairs=args.all_pairs,
                                      **{k: v for k, v in response_options.items()})
    options = {"baseline": baseline, "measures": ranking_measures or None, "test": args.test,
               "correction": args.correction, "missing": args.missing, "all_pairs": args.all_pairs}
    qrels = args.qrels if args.qrels and (ranking_measures or not response_measures) else None
    if args.report:
        path = write_report(runs, qrels, Path(args.out), ptkb_qrels=args.ptkb_qrels, topics=topics,
                            responses=responses, **options)
        print(f"report: {path}")
        return 0
    comparisons = {}
    if qrels:
        comparisons[""] = compare_runs(runs, qrels, **options)
        if args.ptkb_qrels:
            comparisons["ptkb_"] = compare_ptkb(runs, args.ptkb_qrels, topics, **{**options, "measures": None})
    if responses is not None:
        comparisons["responses_"] = responses
    titles = {"": "", "ptkb_": "PTKB statement ranking\n", "responses_": "Responses\n"}
    for prefix, comparison in comparisons.items():
        print(titles[prefix] + comparison.to_markdown() + "\n")
        if args.out:
            files = write_comparison(comparison, Path(args.out), prefix=prefix)
            tables = [files[k] for k in ("csv", "latex", "per_turn", "per_conversation", "pairs") if k in files]
            print(f"tables and plots in {args.out}: " + ", ".join(Path(f).name for f in [*tables, *files["plots"]])
                  + "\n")
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


def _ranker_arguments(p: argparse.ArgumentParser, kind: str) -> None:
    p.add_argument("--model", default="bundled:minilm", help="ranker model: hub id, folder, or bundled:minilm")
    p.add_argument("--kind", choices=["bi-encoder", "cross-encoder"], default=kind)
    p.add_argument("--queries", default="manual", metavar="raw|manual|FILE",
                   help="raw or resolved utterances of the topics, or a file of 'qid<TAB>text' lines")


def _add_rerank(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rerank", help="re-rank an existing run's top passages with a bi- or cross-encoder",
                       description="Re-rank each turn's top --depth passages of RUN against the turn's query and "
                                   "write them as a TREC run (passages below --depth are dropped). Texts come from "
                                   "the run where it carries them, else from --index.")
    p.add_argument("run", help="a run in any supported format")
    p.add_argument("--index", help="the Lucene index the run's passages come from (for their texts)")
    p.add_argument("--topics", help="topic JSON (needed for --queries raw|manual)")
    _ranker_arguments(p, "cross-encoder")
    p.add_argument("--depth", type=int, default=100, help="passages re-ranked per turn (default 100)")
    p.add_argument("--out", required=True, help="TREC run file")
    p.add_argument("--run-name", help="default: the run's name + '-rerank'")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines.queries import queries_for
        from ikatkit.rank import make_ranker
        from ikatkit.rank.standalone import rerank_run
        from ikatkit.runs.io import read_run, write_run

        original = read_run(args.run)
        queries = queries_for(args.queries, args.topics)
        texts = _index_texts(args.index)
        reranked = rerank_run(original, queries, make_ranker(args.kind, args.model), texts, args.depth, args.run_name)
        write_run(reranked, args.out, "trec")
        print(f"re-ranked the top {args.depth} passages of {len(reranked.turns)} turns -> {args.out}")
        return 0

    p.set_defaults(func=run)


def _index_texts(index: str | None) -> Callable[[list[str]], dict[str, str]]:
    """Stored passage texts of ``index``; without an index, none (the run must carry its texts)."""
    if index is None:
        return lambda ids: {}
    from ikatkit.index.texts import passage_texts

    return passage_texts(index=index, why="re-ranking")


def _add_ptkb(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ptkb", help="rank each turn's PTKB statements for a topic file (no pipeline)",
                       description="Rank every turn's PTKB statements against its query with a bi- or "
                                   "cross-encoder and write 'qid Q0 key rank score name' lines (evaluate them with "
                                   "`ikatkit eval FILE --qrels PTKB_QRELS --measures nDCG@5`).")
    p.add_argument("topics", help="topic JSON")
    _ranker_arguments(p, "bi-encoder")
    p.add_argument("--k", type=int, help="statements kept per turn (default: all)")
    p.add_argument("--history-turns", type=int, default=0,
                   help="add --history-weight x each statement's best score against the previous N queries")
    p.add_argument("--history-weight", type=float, default=0.3)
    p.add_argument("--qrels", help="PTKB qrels: also print nDCG@5, P@5, R@5 and AP")
    p.add_argument("--out", required=True, help="TREC-format ranking of PTKB keys")
    p.add_argument("--run-name", default="ptkb")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.pipelines.queries import queries_for
        from ikatkit.rank import make_ranker
        from ikatkit.rank.standalone import rank_topics_ptkb
        from ikatkit.runs.io import write_run
        from ikatkit.runs.model import PassageRef, Response, Run, TurnResult
        from ikatkit.topics import load_topics

        topics = load_topics(args.topics)
        queries = queries_for(args.queries, args.topics)
        rankings = rank_topics_ptkb(topics, queries, make_ranker(args.kind, args.model), args.k, args.history_turns,
                                    args.history_weight)
        turns = [TurnResult(q, [Response(1, "", [PassageRef(key, s) for key, s in r])]) for q, r in rankings.items()]
        ranking = Run(args.run_name, "manual" if args.queries == "manual" else "automatic", turns)
        write_run(ranking, args.out, "trec")
        print(f"ranked the PTKB statements of {len(rankings)} turns -> {args.out}")
        if args.qrels:
            from ikatkit.evaluate.ptkb import evaluate_ptkb

            result = evaluate_ptkb({q: dict(r) for q, r in rankings.items()}, args.qrels)
            print(", ".join(f"{m} {v:.4f}" for m, v in result.mean.items())
                  + f" over {len(result.evaluated)} judged turns")
        return 0

    p.set_defaults(func=run)


def _add_context(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("context", help="evaluate dialogue context selection methods (no LLM): query = utterance + "
                                       "selected turns' utterances, BM25, paired tests against 'all'")
    p.add_argument("--topics", required=True, help="topic JSON with response_provenance (the oracle reads it)")
    p.add_argument("--index", required=True, help="Lucene index built by `ikatkit index build`")
    judged = p.add_mutually_exclusive_group(required=True)
    judged.add_argument("--qrels", help="TREC qrels (also what oracle_qrels reads)")
    judged.add_argument("--provenance-qrels", action="store_true",
                        help="judge each turn's response_provenance passages relevant (topics without qrels, "
                             "e.g. the 2023 training topics for tuning thresholds)")
    p.add_argument("--methods", nargs="+", help="of all, last, oracle, oracle_qrels, cascade, cascade_limit, "
                                                "coherence (default: every one); all, the baseline, is always run")
    p.add_argument("--conversations", nargs="+", help="only these conversations")
    p.add_argument("--n", type=int, default=6, help="turns kept by last and cascade_limit (default 6)")
    p.add_argument("--cascade-threshold", type=float, nargs="+", default=[0.5],
                   help="cascade's joining threshold (default 0.5); several: a row per value (tuning)")
    p.add_argument("--coherence-threshold", type=float, nargs="+", default=[0.5],
                   help="coherence's cut threshold (default 0.5); several: a row per value (tuning)")
    p.add_argument("--passages", type=int, default=10, help="BM25 passages per turn the cascade grounds in")
    p.add_argument("--cascade-check", nargs="+", choices=["context", "utterance"], default=["context"],
                   help="what the cascade scores against a group's passages: the utterance plus the group's turns "
                        "(context, the paper's) or the utterance alone; several: a row per value")
    p.add_argument("--scorer", default="bundled:minilm", help="passage-checking / coherence model")
    p.add_argument("--scorer-kind", choices=["bi-encoder", "cross-encoder", "lexical"], default="bi-encoder",
                   help="lexical: TF-IDF cosine over --index's statistics, no model (--scorer is not read)")
    p.add_argument("--k", type=int, default=1000, help="BM25 depth")
    p.add_argument("--rerank", help="re-rank the top --rerank-depth with this model (kind: --rerank-kind)")
    p.add_argument("--rerank-kind", choices=["bi-encoder", "cross-encoder"], default="bi-encoder")
    p.add_argument("--rerank-depth", type=int, default=100)
    p.add_argument("--llm", help="rewrite with this LLM from each method's context instead of concatenating "
                                 "(transformers backend, e.g. bundled:smollm2)")
    p.add_argument("--max-new-tokens", type=int, default=48, help="LLM rewrite length")
    p.add_argument("--cache", help="cache folder for LLM outputs (default $IKATKIT_CACHE or .cache/ikatkit)")
    p.add_argument("--test", choices=["ttest", "wilcoxon", "randomization"], default="ttest")
    p.add_argument("--correction", choices=["holm", "bonferroni", "none"], default="holm")
    p.add_argument("--out", help="also write context.md and context.json here")

    def run(args: argparse.Namespace) -> int:
        from pathlib import Path

        from ikatkit.evaluate.context import evaluate_context, provenance_qrels, write_evaluation
        from ikatkit.paths import cache_root
        from ikatkit.pipelines.context import METHODS, check_options
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
        scored = {"cascade", "cascade_limit", "coherence"} & set(methods)
        scorer = None
        if scored:
            from ikatkit.rank.lexical import TfidfCosine

            scorer = TfidfCosine(args.index) if args.scorer_kind == "lexical" else \
                make_ranker(args.scorer_kind, args.scorer)
        reranker = make_ranker(args.rerank_kind, args.rerank) if args.rerank else None
        llm = None
        if args.llm:
            from ikatkit.llm import make_llm

            cache = Path(args.cache) if args.cache else cache_root()
            llm = make_llm({"backend": "transformers", "model": args.llm, "max_new_tokens": args.max_new_tokens,
                            "cache_dir": str(cache / "llm")})
        result = evaluate_context(topics, args.index, provenance_qrels(topics) if args.provenance_qrels else args.qrels,
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


def _add_partition(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("partition", help="M-RAG agents: partition selection (Agent-S) and memory refinement (Agent-R)")
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
        from ikatkit.partition.memory import train_refiner as train

        selector = train(args.config, args.topics, args.out, index=args.index, cache_dir=args.cache,
                         conversations=args.conversations)
        print(json.dumps({"out": args.out, **{k: v for k, v in selector.meta.items() if k != "turns"},
                          "turns": len(selector.meta["turns"]), "weights": selector.weights, "bias": selector.bias}))
        return 0

    r.set_defaults(func=train_refiner)


COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_topics, _add_validate, _add_convert, _add_eval, _add_eval_responses, _add_compare, _add_index, _add_search, _add_run, _add_finetune, _add_partition,
                                                             _add_rerank, _add_ptkb,
                                                             _add_demo, _add_context]


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
        code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except IkatError as err:
        print(f"ikatkit: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left (`ikatkit index get ... | head`): end quietly, as a killed `cat` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
