"""Where a k=1000 BM25 search spends its time, path by path (issues 33 and 41).

LuceneSearcher, our TopHits path with the ids converted one String per hit, with one joined string made into
NamedTuple hits (before issue 41), ikatkit's ``Bm25Searcher.search`` (plain pairs), our own reader, and the Java side
alone, on one synthetic 200,000-passage index (built once into /tmp/ikatkit-bench200k), 200 queries, one process.
Each query runs every variant in turn (the order rotated), 3 rounds; a variant's time is the sum of each query's
fastest (robust on a busy machine). LuceneSearcher runs in a pass of its own after them: run between them, it slows
ikatkit more than Java alone (``--lucene-between``).

    python bench/search_paths.py [INDEX PASSAGES] [--lucene-between]   # a realistic index of bench_scale.py, e.g.
    python bench/search_paths.py /work/scale-indexes/r200000/index 200000
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from itertools import repeat
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).parent))
from common import interleaved, sentence  # noqa: E402

from ikatkit.index.build import build_index  # noqa: E402

INDEX = Path("/tmp/ikatkit-bench200k")
PASSAGES, QUERIES, K = 200000, 200, 1000


class Former(NamedTuple):
    """The hits before issue 41: a NamedTuple each."""
    docid: str
    score: float


def synthetic_index(rng: random.Random) -> Path:
    """The bench_search corpus (same generator and seed), built once."""
    texts = [" ".join(sentence(rng) for _ in range(rng.randint(5, 10))) for _ in range(PASSAGES)]
    if not INDEX.exists():
        source = INDEX.with_suffix(".jsonl")
        with open(source, "w", encoding="utf-8") as handle:
            for i, text in enumerate(texts):
                handle.write(json.dumps({"id": f"clueweb22-en0000-00-{i:05d}:{i // 100000}", "contents": text}) + "\n")
        build_index([source], INDEX, threads=2)
    return INDEX


def main() -> None:
    from ikatkit.java import autoclass
    from ikatkit.capabilities import Hit
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.retrieve.lucene import SPARE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path, nargs="?", help="a realistic index of bench_scale.py (else the synthetic)")
    parser.add_argument("passages", type=int, nargs="?", help="its size (its generator's queries)")
    parser.add_argument("--lucene-between", action="store_true",
                        help="run LuceneSearcher between the others, query by query, as this bench did before")
    args = parser.parse_args()
    rng = random.Random(1)
    if args.index:  # a realistic collection's index of bench_scale.py and its generator's queries
        from realistic import Generator

        index = args.index
        queries = Generator(args.passages).queries(QUERIES)
    else:
        index = synthetic_index(rng)
        queries = [" ".join(rng.sample(sentence(rng).rstrip(".").split(), 4)) for _ in range(QUERIES)]
    searcher = Bm25Searcher(index)
    from jnius import cast  # only once our JVM runs

    directory = autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.io.File")(str(index)).toPath())
    opened = autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
    reader = cast("org.apache.lucene.index.IndexReader", opened)
    own = autoclass("org.apache.lucene.search.IndexSearcher")(reader)
    own.setSimilarity(searcher.pyserini.object.get_similarity())

    def top(lucene: Any, query: str) -> Any:
        lucene_query = searcher.generator.buildQuery("contents", searcher.analyzer, query)
        return searcher.lucene.top_hits.search(lucene, lucene_query, K, SPARE, searcher.lucene.sort, "id")

    def per_id(lucene: Any, query: str) -> list[Hit]:
        found = top(lucene, query)
        return list(zip(found.ids, found.scores))

    def named(lucene: Any, query: str) -> list[Former]:
        found = top(lucene, query)
        return list(map(tuple.__new__, repeat(Former), zip(found.joinedIds.split("\n"), found.scores)))

    variants: dict[str, Callable[[str], object]] = {
        "one_string_per_id": lambda q: per_id(searcher.lucene.searcher, q),
        "own_reader": lambda q: per_id(own, q),
        "namedtuple_hits": lambda q: named(searcher.lucene.searcher, q),
        "ikatkit": lambda q: searcher.search(q, K),
        "java_only": lambda q: top(searcher.lucene.searcher, q),
    }
    anchor: dict[str, Callable[[str], object]] = {"lucene_searcher": lambda q: searcher.pyserini.search(q, K)}
    for function in [*variants.values(), *anchor.values()]:
        [function(q) for q in queries[:50]]  # warm up (JIT)
    if args.lucene_between:
        best, _ = interleaved(queries, {**anchor, **variants}, 3, keep=set(variants))
    else:  # results kept alive as a batch's are; LuceneSearcher in its own pass: run between the others, it slows them
        best, _ = interleaved(queries, variants, 3, keep=set(variants))
        best.update(interleaved(queries, anchor, 3)[0])
    print({name: round(QUERIES / value, 1) for name, value in best.items()}, "q/s (per query best of 3)")
    print({name: round(best["lucene_searcher"] / value, 2) for name, value in best.items()}, "ratio vs LuceneSearcher")
    print({name: round(best["java_only"] / value, 3) for name, value in best.items()}, "ratio vs Java alone")
    reference = [searcher.pyserini.search(q, K) for q in queries]
    mine = [searcher.search(q, K) for q in queries]
    same = all([(h.docid, h.score) for h in a] == b for a, b in zip(reference, mine))
    print("same ids and scores as LuceneSearcher:", same, f"({sum(map(len, mine))} hits)")


if __name__ == "__main__":
    main()
