"""``ikatkit index``: build Lucene, dense, sparse (SPLADE) and partitioned indexes; show stats; look up a passage."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ikatkit.collection.readers import FORMATS
from ikatkit.collection.segment import SPLITTERS
from ikatkit.commands import default, index_verify
from ikatkit.index.build import build_index
from ikatkit.index.manifest import MANIFEST, read_manifest
from ikatkit.index.dense import build_dense
from ikatkit.index.encode import BACKENDS
from ikatkit.index.indexing import SEGMENTERS
from ikatkit.index.sparse import build_sparse
from ikatkit.models import DEFAULT_ENCODER
from ikatkit.partition.strategies import STRATEGIES
from ikatkit.placement import DTYPES
from ikatkit.progress import Progress

SHOWN_PROBLEMS = 5  # skipped records named on the terminal; the manifest keeps up to 20


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build BM25, dense (faiss), SPLADE (impact) and partitioned indexes; stats, "
                                      "get a passage, verify")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="index a collection (ClueWeb22 records are segmented the iKAT way)")
    b.add_argument("inputs", nargs="+", help="collection files or folders")
    b.add_argument("--out", required=True, help="index folder (re-running on a finished index of the same inputs does "
                                                "nothing; other inputs are refused unless --rebuild)")
    b.add_argument("--rebuild", action="store_true",
                   help="replace a finished index of other inputs in --out (the old one stays until the new is built)")
    b.add_argument("--format", default="auto", choices=["auto", *FORMATS],
                   help="auto detects it from the first record: clueweb22 (raw records, segmented), jsonl (id, "
                        "contents), provenance (the organizers' doc_id, passage_id, passage_text), trecweb, car, "
                        "msmarco (id<TAB>text)")
    b.add_argument("--threads", type=int, help="Anserini indexing threads (default: CPU cores, at most 8)")
    b.add_argument("--segmenter", default="auto", choices=SEGMENTERS,
                   help="who segments ClueWeb22 records: Anserini's indexing threads (java: our collection class, "
                        "rule splitter, needs a JDK's javac) or Python processes feeding them (python: any format "
                        "and splitter, one file can feed every thread); auto = java when it can and there are at "
                        "least as many files as threads")
    b.add_argument("--shards", type=int,
                   help="Python segmenter processes, each feeding one Anserini thread through a named pipe "
                        "(default and at most: threads; at most one per input file)")
    b.add_argument("--splitter", default="auto", choices=SPLITTERS,
                   help="sentence splitter for ClueWeb22 records (official ids need spaCy en_core_web_sm)")
    b.add_argument("--heap", default=default(build_index, "heap"), help="Java heap for Anserini")
    d = isub.add_parser("dense",
                        help="encode a Lucene index's passages (or a collection) on Ray, index them with faiss",
                        description="Passages are read as `index build` reads them (or from a Lucene index's stored "
                                    "texts), embedded by Ray Data actors into float16 shards (a killed job resumes "
                                    "with the shards not yet finished), then indexed by faiss.")
    d.add_argument("inputs", nargs="+", help="a Lucene index of `index build`, or collection files or folders")
    d.add_argument("--out", required=True, help="dense index folder (re-running a finished one does nothing)")
    d.add_argument("--model", default=default(build_dense, "model"),
                   help="sentence-transformers model: bundled:minilm (all-MiniLM-L6-v2), a folder or a hub id in the "
                        "local Hugging Face cache")
    d.add_argument("--faiss", default=default(build_dense, "faiss_spec"),
                   help="faiss index_factory spec: Flat, HNSW32, IVF32768,PQ48, ... (auto: Flat up to 1M passages, "
                        "else IVF with ~4 sqrt(n) lists and PQ of dimension/8 bytes, trained on up to 1M sampled "
                        "vectors); a new spec on a finished index re-indexes its embeddings")
    d.add_argument("--backend", default=default(build_dense, "backend"), choices=BACKENDS,
                   help="auto: OpenVINO on CPU workers in float32 (about 2x PyTorch there), else PyTorch")
    d.add_argument("--dtype", default=default(build_dense, "dtype"), choices=DTYPES,
                   help="the encoders' dtype, in work.json's fingerprint and the manifest (a job is not resumed in "
                        "another); auto: float32 on CPUs, float16 on GPUs; other than float32 on PyTorch (OpenVINO "
                        "runs float32); bfloat16 on a CPU with AMX: 2.3-2.6x PyTorch's float32, embeddings within "
                        "cosine 0.999; float16 only on GPUs")
    _add_ray_encoding(d, build_dense)
    d.add_argument("--format", default="auto", choices=["auto", *FORMATS])
    d.add_argument("--splitter", default="auto", choices=SPLITTERS)
    sp = isub.add_parser("sparse", help="encode passages with SPLADE on Ray, build a Lucene impact index (Anserini's)",
                         description="Passages are read as `index dense` reads them, encoded into quantized SPLADE "
                                     "term weights by Ray actors (JSON vector shards: a killed job resumes with the "
                                     "shards not yet finished), then indexed as Anserini's impact index (by ikatkit's "
                                     "ImpactIndexer where a JDK compiles its Java helpers, else by Anserini's "
                                     "IndexCollection). Search it with `ikatkit search --sparse` or a splade "
                                     "resource.")
    sp.add_argument("inputs", nargs="+", help="a Lucene index of `index build`, or collection files or folders")
    sp.add_argument("--out", required=True, help="sparse index folder (re-running a finished one does nothing)")
    sp.add_argument("--model", default=default(build_sparse, "model"),
                    help="SPLADE masked-LM model: a folder, or a hub id in the local Hugging Face cache (never "
                         "downloaded)")
    sp.add_argument("--dtype", default=default(build_sparse, "dtype"), choices=DTYPES,
                    help="the encoders' dtype, in work.json's fingerprint and the manifest (a job is not resumed in "
                         "another); auto: float32; bfloat16 (2.0-2.6x float32 on an AMX CPU) and float16 (GPUs only; "
                         "not yet measured there): weights near float32's, not equal (docs/sparse.md)")
    _add_ray_encoding(sp, build_sparse)
    sp.add_argument("--index-threads", type=int, help="Anserini indexing threads (default: CPU cores, at most 8)")
    sp.add_argument("--heap", default=default(build_sparse, "heap"), help="Java heap for Anserini")
    sp.add_argument("--format", default="auto", choices=["auto", *FORMATS])
    sp.add_argument("--splitter", default="auto", choices=SPLITTERS)
    pt = isub.add_parser("partition", help="split an index or collection into M Lucene indexes (M-RAG partitions)")
    pt.add_argument("source", help="an index of `index build`, or collection files/folder (read as `index build` does)")
    pt.add_argument("--strategy", required=True, choices=STRATEGIES,
                    help="random: LSH over MiniLM embeddings; cluster: k-means (faiss); graph: spectral clustering "
                         "of the kNN graph; category: a record field (--field)")
    pt.add_argument("--partitions", type=int, required=True, help="M, the number of partitions")
    pt.add_argument("--out", required=True, help="folder of part-NNN indexes and partitions.json (resumable)")
    pt.add_argument("--seed", type=int, default=0)
    pt.add_argument("--field", help="category strategy: the record field (url: the URL's host)")
    pt.add_argument("--pattern", help="category strategy: a regex whose first group is the category, "
                                      "e.g. --field id --pattern '^clueweb22-(en\\d+)'")
    pt.add_argument("--format", default="auto", choices=["auto", *FORMATS])
    pt.add_argument("--splitter", default="auto", choices=SPLITTERS)
    pt.add_argument("--model", default=DEFAULT_ENCODER, help="sentence-transformers embedding model")
    pt.add_argument("--threads", type=int, help="Anserini threads per partition index")
    s = isub.add_parser("stats", help="what an index holds: its manifest (own index), what Lucene shows (any index)")
    s.add_argument("index")
    g = isub.add_parser("get", help="print a passage's stored text")
    g.add_argument("index")
    g.add_argument("pid", help="passage id, e.g. clueweb22-en0000-00-00000:0")
    index_verify.add(isub)

    def run(args: argparse.Namespace) -> int:
        from ikatkit.index import lookup

        if args.index_command == "dense":
            manifest = _encode(args, build_dense, ["sentence_transformers", "ray", "faiss"], faiss_spec=args.faiss,
                               backend=args.backend)
            print(f"dense index of {manifest['counts']['passages']} passages ({manifest['model']}, "
                  f"{manifest['dimension']} dims, faiss {manifest['faiss']}) -> {args.out}")
        elif args.index_command == "sparse":
            manifest = _encode(args, build_sparse, ["transformers", "ray"], index_threads=args.index_threads,
                               heap=args.heap)
            print(f"sparse index of {manifest['counts']['passages']} passages ({manifest['model']}, "
                  f"{manifest['quantization']}) -> {args.out}")
        elif args.index_command == "build":
            _build(args)
        elif args.index_command == "partition":
            from ikatkit.partition.build import partition_index

            partition_index(args.source, args.out, args.strategy, args.partitions, seed=args.seed, field=args.field,
                            pattern=args.pattern, fmt=args.format, splitter=args.splitter, model=args.model,
                            threads=args.threads)
        elif args.index_command == "stats":
            print(json.dumps(_stats(args.index), indent=2))
        else:
            text = lookup.doc(args.index, args.pid)
            if text is None:
                print(f"ikatkit: {args.pid} is not in {args.index}", file=sys.stderr)
                return 1
            print(text)
        return 0

    p.set_defaults(func=run)


def _encode(args: argparse.Namespace, build: Callable[..., dict[str, Any]], modules: list[str],
            **options: Any) -> dict[str, Any]:
    """``index dense`` / ``index sparse``: the collection-encoding job's options (:func:`_add_ray_encoding`) and the
    kind's own ``options``, with a progress bar of the passages encoded; the manifest."""
    from ikatkit.extras import require

    require(modules, f"index {args.index_command}")  # before the progress bar opens
    with Progress("encoded", "passages") as bar:
        return build(args.inputs, args.out, model=args.model, ray_address=args.ray, batch_size=args.batch_size,
                     shard_size=args.shard_size, threads=args.threads, workers=args.workers, fmt=args.format,
                     splitter=args.splitter, dtype=args.dtype, progress=bar, **options)


def _stats(index: str) -> dict[str, Any]:
    """What ``index stats`` prints: a Lucene index's manifest (own index) and what Lucene reports (documents, fields
    stored, positions, doc vectors); a dense or partitioned index's manifest; the organizers' SPLADE index's counts
    (rows, ids, terms, postings), read from its files."""
    from ikatkit.artifact import open_index
    from ikatkit.index import lookup
    from ikatkit.index.manifest import DENSE, PARTITIONS, SPARSE_HDF5

    folder = open_index(index)
    if folder.kind == SPARSE_HDF5:
        from ikatkit.index.sparse_hdf5 import open_hdf5_index

        return open_hdf5_index(folder.path).stats()
    if folder.kind in (DENSE, PARTITIONS):
        assert folder.manifest is not None  # ikatkit's own kinds
        return folder.manifest
    return lookup.stats(index)


def _build(args: argparse.Namespace) -> None:
    """``index build``: progress on stderr (a bar on a terminal, a line every 30 s in a log), then a summary."""
    before = read_manifest(args.out) if Path(args.out).is_dir() else None
    bars: dict[str, Progress] = {}
    with ExitStack() as stack:

        def progress(what: str, done: int, total: int | None) -> None:
            if what not in bars:
                bars[what] = stack.enter_context(Progress(what, what, total))
            bars[what].moveto(done)

        manifest = build_index(args.inputs, args.out, fmt=args.format, threads=args.threads, shards=args.shards,
                               splitter=args.splitter, heap=args.heap, segmenter=args.segmenter, progress=progress,
                               rebuild=args.rebuild)
    counts = manifest["counts"]
    built = before is not None and before.get("built") == manifest["built"]
    print(f"{'already built: ' if built else 'indexed '}{counts['passages']} passages of {counts['documents']} "
          f"documents ({counts['skipped']} input records skipped) in {manifest['seconds']} s -> {args.out}")
    problems = manifest["skipped_examples"]
    if counts["skipped"] and not built:
        shown = problems[:SHOWN_PROBLEMS]
        print(f"skipped records (first {len(shown)}; up to {len(problems)} in {Path(args.out) / MANIFEST}):\n  "
              + "\n  ".join(shown), file=sys.stderr)


def _add_ray_encoding(p: argparse.ArgumentParser, build: Callable[..., Any]) -> None:
    """The options of encoding on Ray that `index dense` and `index sparse` share, defaults from ``build``."""
    p.add_argument("--ray", help="auto or HOST:PORT to join a running Ray cluster (default: a local Ray on this "
                                 "machine's cores)")
    p.add_argument("--batch-size", type=int, default=default(build, "batch_size"), help="passages per forward pass")
    p.add_argument("--threads", type=int, default=default(build, "threads"), help="CPU threads per encoder worker")
    p.add_argument("--workers", type=int, help="encoder workers (default: one per GPU of the cluster, else one per "
                                               "--threads CPUs)")
    p.add_argument("--shard-size", type=int, default=default(build, "shard_size"),
                   help="passages per shard, the unit of resuming")
