"""Cross-encoder re-ranking on GtR-shaped input (5 queries x 200 candidates drawn from an overlapping pool)
against naive `CrossEncoder.predict(pairs, batch_size=32)` on every pair, in the same run; scores must agree
to 1e-4. Two shapes: each candidate against the query that retrieved it (no duplicate pairs), and every
candidate against one rewrite (duplicates, scored once).

The cross-encoder is built here from the bundled MiniLM (an untrained head: timing only, scores meaningless).
The ranker is built (and, for OpenVINO, converted to IR into a temporary cache) before timing starts; its
build time is printed apart.

    python bench/bench_rerank.py [--shared-query] [--backend torch|openvino] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import sentence, timed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=400, help="distinct passages the 5 queries retrieve from")
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--shared-query", action="store_true",
                        help="only the shape where every candidate is scored against one rewrite (as when GtR's "
                             "lists are re-ranked with the rewrite); by default both shapes")
    parser.add_argument("--backend", default=None, help="the ranker's backend (default: the ranker's default)")
    parser.add_argument("--repeats", type=int, default=1, help="time each side this many times, keep the fastest")
    args = parser.parse_args()
    from sentence_transformers import CrossEncoder

    from ikatkit.models import resolve_model
    from ikatkit.rank import make_ranker

    rng = random.Random(0)
    pool = [" ".join(sentence(rng) for _ in range(rng.randint(4, 12))) for _ in range(args.pool)]
    queries = [sentence(rng) for _ in range(5)]
    lists = [rng.sample(pool, args.candidates) for _ in queries]
    with tempfile.TemporaryDirectory() as folder:
        os.environ["IKATKIT_CACHE"] = str(Path(folder) / "cache")
        CrossEncoder(resolve_model("bundled:minilm"), num_labels=1).save(str(Path(folder) / "ce"))
        naive_model = CrossEncoder(str(Path(folder) / "ce"), max_length=512)
        options = {"backend": args.backend} if args.backend else {}
        build, ranker = timed(lambda: make_ranker("cross-encoder", str(Path(folder) / "ce"), **options))
        for shared in [True] if args.shared_query else [False, True]:
            pairs = [(queries[0] if shared else q, p) for q, passages in zip(queries, lists) for p in passages]
            naive = ours = float("inf")
            for _ in range(args.repeats):
                seconds, expected = timed(lambda: naive_model.predict(pairs, batch_size=32))
                naive = min(naive, seconds)
                seconds, scores = timed(lambda: ranker.score(pairs))
                ours = min(ours, seconds)
            diff = max(abs(a - float(b)) for a, b in zip(scores, expected))
            print(json.dumps({"shared_query": shared, "backend": ranker.backend, "pairs": len(pairs),
                              "distinct_pairs": len(set(pairs)), "ranker_build_s": round(build, 2),
                              "naive_pairs_per_s": round(len(pairs) / naive, 1),
                              "ikatkit_pairs_per_s": round(len(pairs) / ours, 1),
                              "ratio_vs_naive": round(naive / ours, 2), "max_score_difference": diff}, indent=2))


if __name__ == "__main__":
    main()
