"""Where a k=1000 BM25 search spends its time (issue 33, item 8): LuceneSearcher, our TopHits path with the ids
converted one String per hit (before), with one joined string (now), and the Java side alone, on one synthetic
200,000-passage index (built once into /tmp/ikatkit-bench200k), 200 queries, best of 3, all in one process.

    python bench/search_paths.py
"""
import json, random, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from common import sentence
from ikatkit.index.build import build_index

def main():
    rng = random.Random(1)
    index = Path("/tmp/ikatkit-bench200k")
    if not index.exists():
        with open("/tmp/ikatkit-b200k.jsonl", "w") as h:
            for i in range(200000):
                text = " ".join(sentence(rng) for _ in range(rng.randint(5, 10)))
                h.write(json.dumps({"id": f"clueweb22-en0000-00-{i:05d}:{i // 100000}", "contents": text}) + "\n")
        build_index(["/tmp/ikatkit-b200k.jsonl"], index, threads=2)
    else:
        for i in range(200000):
            " ".join(sentence(rng) for _ in range(rng.randint(5, 10)))
    from ikatkit.retrieve.bm25 import Bm25Searcher, SPARE, Hit, hits
    from ikatkit.java import autoclass

    s = Bm25Searcher(index)
    from jnius import cast
    queries = [" ".join(rng.sample(sentence(rng).rstrip(".").split(), 4)) for _ in range(200)]
    own = autoclass("org.apache.lucene.search.IndexSearcher")(cast("org.apache.lucene.index.IndexReader",
        autoclass("org.apache.lucene.index.DirectoryReader").open(autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.io.File")(str(index)).toPath()))))
    own.setSimilarity(s.pyserini.object.get_similarity())
    def ours(searcher, k, convert=True):
        out = []
        for q in queries:
            lq = s.generator.buildQuery("contents", s.analyzer, q)
            top = s.top_hits.search(searcher, lq, k, SPARE, s.sort, "id")
            out.append(list(map(Hit, top.ids, top.scores)) if convert else hits(top))
        return out
    def javaonly(searcher, k):
        for q in queries:
            lq = s.generator.buildQuery("contents", s.analyzer, q)
            s.top_hits.search(searcher, lq, k, SPARE, s.sort, "id")
    variants = {"lucene_searcher": lambda k: [s.pyserini.search(q, k) for q in queries],
                "shared_reader": lambda k: ours(s.searcher, k), "own_reader": lambda k: ours(own, k), "joined_ids": lambda k: ours(s.searcher, k, False),
                "java_only_shared": lambda k: javaonly(s.searcher, k)}
    for name, f in variants.items():
        f(1000)
    times = {n: [] for n in variants}
    for r in range(3):
        for name, f in variants.items():
            t = time.perf_counter(); f(1000); times[name].append(time.perf_counter() - t)
    best = {n: min(v) for n, v in times.items()}
    print({n: round(200 / v, 1) for n, v in best.items()}, "q/s (best of 3)")
    print({n: round(best["lucene_searcher"] / v, 2) for n, v in best.items()}, "ratio vs LuceneSearcher")
    ref = [s.pyserini.search(q, 1000) for q in queries]
    mine = ours(s.searcher, 1000, False)
    print("same ids and scores as LuceneSearcher:", all([(h.docid, h.score) for h in a] == [(h.docid, h.score) for h in b] for a, b in zip(ref, mine)), sum(map(len, mine)))
if __name__ == "__main__":
    main()
