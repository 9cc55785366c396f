"""The 894 real iKAT 2023 passages indexed by `ikatkit index sparse` with a random-weight model of SPLADE++'s shape
(BERT-base masked LM, 30,522 terms: bench/splade_random.py), then 20 manual queries of the 2023 test topics searched
through the `splade` searcher at k = 1,000: each ranking is compared with a brute-force integer dot product over the
stored quantized vectors (every score the sum over shared terms of query weight x passage weight). The tests do the
same on 40 passages (tests/test_splade.py); on 2 CPU cores all 894 at full depth take minutes, so here. Usage:

    python bench/splade_real_passages.py [--data ../shared/ikat] [--work /tmp/splade-894] [--queries 20]

Prints the encoding time, the vectors' sizes and the number of rankings equal to the brute force.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import provenance_jsonl
from splade_random import random_splade


def stored_vectors(index: Path) -> dict[str, dict[str, int]]:
    return {r["id"]: r["vector"] for shard in sorted((index / "vectors").glob("*.jsonl.gz"))
            for r in map(json.loads, gzip.open(shard, "rt", encoding="utf-8"))}


def brute_force(query: dict[str, int], vectors: dict[str, dict[str, int]], k: int) -> list[tuple[str, float]]:
    scored = [(pid, float(sum(w * vector.get(term, 0) for term, w in query.items())))
              for pid, vector in vectors.items()]
    return sorted((hit for hit in scored if hit[1] > 0), key=lambda hit: (-hit[1], hit[0]))[:k]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "ikat")
    parser.add_argument("--work", type=Path, default=Path("/tmp/splade-894"))
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    from ikatkit.retrieve.sparse import SparseSearcher
    from ikatkit.topics import load_topics

    args.work.mkdir(parents=True, exist_ok=True)
    passages = provenance_jsonl(args.data / "2023", args.work / "passages.jsonl")
    model = random_splade(args.work / "bert-base")
    index = args.work / "index"
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ikatkit.cli", "index", "sparse", str(passages), "--out", str(index),
                    "--model", str(model)], check=True)
    seconds = time.perf_counter() - began
    vectors = stored_vectors(index)
    sizes = [len(v) for v in vectors.values()]
    searcher = SparseSearcher(index)
    queries = list(load_topics(args.data / "2023" / "test_topics.json").queries("manual").values())[:args.queries]
    encoded = dict(zip(map(str, range(len(queries))), searcher.encoder.encode_queries(queries)))
    found = searcher.search_vectors(encoded, 1000)
    equal = sum(found[qid] == brute_force(query, vectors, 1000) for qid, query in encoded.items())
    print(json.dumps({"passages": len(vectors), "index_sparse_seconds": round(seconds, 1),
                      "terms_per_passage_median": statistics.median(sizes),
                      "terms_per_query_median": statistics.median(len(q) for q in encoded.values()),
                      "rankings_equal_to_brute_force": f"{equal} of {len(encoded)}",
                      "hits_per_query_median": statistics.median(len(h) for h in found.values())}))
    return 0 if equal == len(encoded) else 1


if __name__ == "__main__":
    sys.exit(main())
