"""SPLADE search and encoding speed (issue 60).

Search: the impact index of synthetic SPLADE-like vectors of published SPLADE++ sparsity: 100-200 terms a passage,
20-60 a query, terms drawn from the 30,522 BERT WordPiece terms by a Zipf law (s = 1), weights log-normal as quantized
SPLADE++ weights are (median 40, capped at 300). The index is the one ``ikatkit index sparse`` builds (Anserini's
``IndexCollection -collection JsonVectorCollection -impact -pretokenized -storeRaw``), built by ``--builder``:
``anserini`` runs that command, which writes each term weight times into a text it tokenizes (396 s for 200,000
passages here); ``terms`` (default) runs ``ImpactIndexer.java`` with the same command line, as ``index sparse`` does
where a JDK compiles ikatkit's Java helpers: Lucene gets each term once with its weight as the term frequency, the
same fields, postings and frequencies. ``--check-builder N`` first builds N
passages both ways and reports whether the two indexes agree (field options, postings and term-frequency totals, the
top 1,000 of every query). k=1000, one query at a time, three sides timed query by query in turn (the order
rotated, ``common.interleaved``, the fastest of ``--repeats`` rounds per query):

- ikatkit: ``SparseSearcher.search_vectors`` (the encoded vector to the ranking as (id, score) pairs in Python);
- Java alone: the same query built and searched in Java (``SparseQuery.build`` + ``TopHits.search`` or, from
  ``PARALLEL_FROM`` passages, ``ParallelSearch.search``), nothing read into Python;
- Anserini: its own ``SimpleImpactSearcher.search(Map<String, Integer>, k)`` (one thread).

Every ranking of ikatkit is compared with Anserini's, hit by hit. Then a batch: ``search_vectors`` of all queries
against ``TopHits.submit(...).all()`` (Java alone) on ``--threads`` threads.

Encoding: passages a second of ``SparseEncoder`` on this machine's CPU (a random-weight BERT-base of SPLADE++'s
shape, ``bench/splade_random.py``; the real weights cost the same), real iKAT passages, batch 8, ``--encode``
passages, in float32 and bfloat16 (``index sparse --dtype``), the collection-scale time each implies (116,838,987
passages), and how near bfloat16's vectors are to float32's (``splade_random.agreement``). ``--passages 0``
measures the encoding alone.

    python bench/bench_splade.py [--passages 2000000] [--queries 200] [--root /tmp/ikatkit-splade-bench]
        [--threads 2] [--repeats 3] [--encode 32] [--builder terms] [--check-builder 20000] [--out splade.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import interleaved, machine_busy_s, print_json  # noqa: E402

COLLECTION = 116_838_987  # passages of the iKAT collection
SHARD = 100_000


def vocabulary() -> list[str]:
    """The 30,522 WordPiece terms of BERT uncased (the bundled MiniLM's tokenizer: SPLADE++'s vocabulary)."""
    from transformers import AutoTokenizer

    from ikatkit.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
    return tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))


def vectors(rng: np.random.Generator, terms: list[str], n: int, low: int, high: int) -> list[dict[str, int]]:
    """``n`` vectors of ``low``-``high`` distinct terms, Zipf-distributed over ``terms``, log-normal weights."""
    ranks = 1.0 / np.arange(1, len(terms) + 1)
    cumulative = np.cumsum(ranks / ranks.sum())
    found = []
    for _ in range(n):
        size = int(rng.integers(low, high + 1))
        chosen = np.unique(np.searchsorted(cumulative, rng.random(size * 2)))[:size]
        chosen = np.minimum(chosen, len(terms) - 1)
        weights = np.clip(np.rint(rng.lognormal(math.log(40), 0.8, len(chosen))), 1, 300).astype(int)
        found.append(dict(zip((terms[i] for i in chosen), weights.tolist())))
    return found


def build(root: Path, passages: int, threads: int, terms: list[str], builder: str) -> Path:
    """The impact index of ``passages`` synthetic vectors under ``root`` by ``builder`` (each made once)."""
    from ikatkit.index.anserini import IMPACT_OPTIONS, Anserini, impact_builder

    index = root / f"p{passages}" / ("index" if builder == "anserini" else f"index-{builder}")
    if (index / "built.json").exists():
        return index
    source = root / f"p{passages}" / "vectors"
    source.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for shard, start in enumerate(range(0, passages, SHARD)):
        path = source / f"{shard:05d}.jsonl.gz"
        if path.exists():
            continue
        tmp = path.with_suffix(".tmp")
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as handle:
            for i, vector in enumerate(vectors(rng, terms, min(SHARD, passages - start), 100, 200), start):
                handle.write(json.dumps({"id": f"clueweb22-en{i // 10**7:04d}-00-{i % 10**7:07d}:0", "contents": "",
                                         "vector": vector}) + "\n")
        os.replace(tmp, path)
    written = time.perf_counter() - started
    started = time.perf_counter()
    helpers, main = impact_builder(builder)
    with Anserini(source, index, threads, "8g", collection="JsonVectorCollection", helpers=helpers,
                  options=IMPACT_OPTIONS, main=main) as run:
        run.wait(passages)
    (index / "built.json").write_text(json.dumps({"passages": passages, "builder": builder,
                                                  "write_s": round(written, 1),
                                                  "index_s": round(time.perf_counter() - started, 1)}))
    return index


def builders_agree(root: Path, passages: int, threads: int, terms: list[str], queries: list[dict[str, int]]
                   ) -> dict[str, Any]:
    """Anserini's index and ``ImpactIndexer``'s of the same ``passages`` vectors: their field options, postings
    totals and top 1,000 rankings of ``queries``."""
    from ikatkit.index.lucene import postings_summary
    from ikatkit.retrieve.sparse import SparseSearcher

    found: dict[str, Any] = {}
    rankings = {}
    for builder in ("anserini", "terms"):
        index = build(root, passages, threads, terms, builder)
        found[builder] = {"index_s": json.loads((index / "built.json").read_text())["index_s"],
                          **postings_summary(index)}
        searcher = SparseSearcher(index, model="synthetic", threads=threads)
        rankings[builder] = searcher.search_vectors(dict(enumerate(queries)), 1000)  # type: ignore[arg-type]
    same = sum(rankings["anserini"][i] == rankings["terms"][i] for i in range(len(queries)))
    found["same_index"] = all(found["anserini"][key] == found["terms"][key]
                              for key in ("fields", "documents", "postings", "frequencies"))
    found["same_rankings"] = f"{same}/{len(queries)}"
    return found


def search(index: Path, queries: list[dict[str, int]], threads: int, repeats: int) -> dict[str, Any]:
    from ikatkit.java import autoclass
    from ikatkit.retrieve.lucene import SPARE
    from ikatkit.retrieve.sparse import SparseSearcher

    searcher = SparseSearcher(index, model="synthetic", threads=threads)  # the model encodes nothing here
    anserini = autoclass("io.anserini.search.SimpleImpactSearcher")(str(index))
    hashmap, integer = autoclass("java.util.HashMap"), autoclass("java.lang.Integer")
    encoded = ["\n".join(f"{t} {w}" for t, w in q.items()) for q in queries]
    maps = []
    for query in queries:
        weights = hashmap()
        for term, weight in query.items():
            weights.put(term, integer(weight))
        maps.append(weights)
    k = 1000

    top = searcher.lucene

    def java(i: int) -> Any:
        built = searcher.sparse_query.build("contents", encoded[i])
        if top.parallel is not None:
            return top.parallel.search(built, k, SPARE, top.sort, "id")
        return top.top_hits.search(top.searcher, built, k, SPARE, top.sort, "id")

    sides = {"ikatkit": lambda i: searcher.search_vectors({"q": queries[i]}, k)["q"],
             "java": java,
             "anserini": lambda i: anserini.search(maps[i], k)}
    busy = machine_busy_s()
    seconds, kept = interleaved(list(range(len(queries))), sides, repeats, keep=("ikatkit", "anserini"))
    same = sum(ours == [(h.docid, float(h.score)) for h in theirs]
               for ours, theirs in zip(kept["ikatkit"], kept["anserini"]))
    batch = [searcher.sparse_query.build("contents", e) for e in encoded]
    whole = {"ikatkit": math.inf, "java": math.inf}
    for _ in range(repeats):
        start = time.perf_counter()
        searcher.search_vectors(dict(enumerate(queries)), k)  # type: ignore[arg-type]
        whole["ikatkit"] = min(whole["ikatkit"], time.perf_counter() - start)
        start = time.perf_counter()
        top.top_hits.submit(top.searcher, batch, k, SPARE, top.sort, "id", threads).all()
        whole["java"] = min(whole["java"], time.perf_counter() - start)
    qps = {name: round(len(queries) / s, 2) for name, s in seconds.items()}
    batch_qps = {name: round(len(queries) / s, 2) for name, s in whole.items()}
    return {"k": k, "threads": threads, "parallel": top.parallel is not None,
            "alone_qps": qps, "ikatkit_over_java": round(seconds["java"] / seconds["ikatkit"], 3),
            "ikatkit_over_anserini": round(seconds["anserini"] / seconds["ikatkit"], 2),
            "same_rankings_as_anserini": f"{same}/{len(queries)}",
            "batch_qps": batch_qps, "batch_ikatkit_over_java": round(whole["java"] / whole["ikatkit"], 3),
            "machine_busy_s_during": round(machine_busy_s() - busy, 1)}


def encoding(passages: int, root: Path) -> dict[str, Any]:
    """Passages a second of the random BERT-base SPLADE on this CPU in float32 and (where the CPU has AMX or AVX-512
    bf16) bfloat16, and how near bfloat16's quantized vectors are to float32's: the terms kept, the weights, and the
    top 10 of 20 real queries (float32 query vectors) over these passages by the dot product."""
    import torch

    from ikatkit.index.sparse_encoder import SparseEncoder
    from splade_random import agreement, random_splade

    model = random_splade(root / "bert-base-random")
    shared = Path(__file__).resolve().parents[2] / "shared/ikat/2023"
    texts = [json.loads(line)["passage_text"] for line in
             (shared / "test_provenance_passages.jsonl").read_text(encoding="utf-8").splitlines()[:passages]]
    report: dict[str, Any] = {"passages": len(texts), "torch_threads": torch.get_num_threads()}
    found = {}
    for dtype in ("float32", "bfloat16"):
        encoder = SparseEncoder(str(model), dtype=dtype)
        encoder.encode(texts[:8])  # warm-up
        start = time.perf_counter()
        found[dtype] = encoder.encode(texts)
        rate = len(texts) / (time.perf_counter() - start)
        report[dtype] = {"placement": encoder.placement.identity(),
                         "passages_per_s": round(rate, 2),
                         "collection_days_one_worker": round(COLLECTION / rate / 86400, 1)}
        if dtype == "float32":
            topics = json.loads((shared / "test_topics.json").read_text(encoding="utf-8"))
            utterances = [turn["resolved_utterance"] for topic in topics for turn in topic["turns"]][:20]
            queries = encoder.encode_queries(utterances)
    report["bfloat16_against_float32"] = {
        "speedup": round(report["bfloat16"]["passages_per_s"] / report["float32"]["passages_per_s"], 2),
        **agreement(found["float32"], found["bfloat16"], queries)}
    return report


def main() -> None:
    from ikatkit.index.anserini import BUILDERS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=2_000_000, help="searched passages (0: the encoding alone)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--root", type=Path, default=Path("/tmp/ikatkit-splade-bench"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--encode", type=int, default=32, help="passages encoded for the throughput (0: none)")
    parser.add_argument("--builder", choices=BUILDERS, default="terms",
                        help="anserini: IndexCollection as `index sparse` runs it; terms: ImpactIndexer.java, "
                             "the same index with each term once (its weight a custom term frequency)")
    parser.add_argument("--check-builder", type=int, default=20_000, metavar="PASSAGES",
                        help="first build this many passages both ways and compare the indexes (0: skip)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    terms = vocabulary()
    queries = vectors(np.random.default_rng(1), terms, args.queries, 20, 60)
    report: dict[str, Any] = {"passages": args.passages}
    if args.check_builder:
        report["builders_agree"] = builders_agree(args.root, args.check_builder, args.threads, terms, queries)
    if args.passages:
        index = build(args.root, args.passages, args.threads, terms, args.builder)
        report["built"] = json.loads((index / "built.json").read_text())
        report["search"] = search(index, queries, args.threads, args.repeats)
    if args.encode:
        report["encoding_cpu"] = encoding(args.encode, args.root)
    print_json(report, args.out)


if __name__ == "__main__":
    main()
