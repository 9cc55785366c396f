"""Cross-encoder re-ranking on GtR-shaped input (5 queries x 200 candidates drawn from an overlapping pool)
against naive `CrossEncoder.predict` on every pair, in the same run; scores must agree to 1e-4.

The cross-encoder is built here from the bundled MiniLM (an untrained head: timing only, scores meaningless).

    python bench/bench_rerank.py
"""

from __future__ import annotations

import argparse
import json
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
                        help="score every candidate against one rewrite (as when GtR's lists are re-ranked with the "
                             "rewrite) instead of against the query that retrieved it")
    args = parser.parse_args()
    from sentence_transformers import CrossEncoder

    from ikatkit.models import resolve_model
    from ikatkit.rank import make_ranker

    rng = random.Random(0)
    pool = [" ".join(sentence(rng) for _ in range(rng.randint(4, 12))) for _ in range(args.pool)]
    queries = [sentence(rng) for _ in range(5)]
    pairs = [(queries[0] if args.shared_query else q, p) for q in queries for p in rng.sample(pool, args.candidates)]
    with tempfile.TemporaryDirectory() as folder:
        CrossEncoder(resolve_model("bundled:minilm"), num_labels=1).save(folder)
        naive_model = CrossEncoder(folder, max_length=512)
        naive, expected = timed(lambda: naive_model.predict(pairs, batch_size=32))
        ranker = make_ranker("cross-encoder", folder)
        ours, scores = timed(lambda: ranker.score(pairs))
    diff = max(abs(a - float(b)) for a, b in zip(scores, expected))
    print(json.dumps({"shared_query": args.shared_query, "pairs": len(pairs), "distinct_pairs": len(set(pairs)),
                      "naive_pairs_per_s": round(len(pairs) / naive, 1), "ikatkit_pairs_per_s": round(len(pairs) / ours, 1),
                      "ratio_vs_naive": round(naive / ours, 2), "max_score_difference": diff}, indent=2))


if __name__ == "__main__":
    main()
