"""Dense encoding on the CPU through ``ikatkit.index.encode.DenseEncoder``: passages a second of the default path
(sentence-transformers' ``encode``, float32) and of the GPU path run on the CPU (tokenized ahead by a thread,
length-sorted), in float32 and bfloat16, with each one's largest difference from the default (1 - cosine).

    python bench/bench_encoder.py --passages 2000 --threads 2

The model is the bundled all-MiniLM-L6-v2; passages are synthetic (``--words`` words of the benchmarks' sentences).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from common import sentence  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--words", type=int, default=110)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    from ikatkit.index.encode import DenseEncoder

    rng = random.Random(0)
    texts = []
    for _ in range(args.passages):
        words: list[str] = []
        while len(words) < args.words:
            words += sentence(rng).split()
        texts.append(" ".join(words[:args.words]))
    default = DenseEncoder("bundled:minilm", threads=args.threads, device="cpu")
    default.encode(texts[:64], args.batch_size)
    began = time.perf_counter()
    reference = default.encode(texts, args.batch_size)
    print(f"default (encode, float32): {args.passages / (time.perf_counter() - began):.1f} passages/s")
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    batches = [order[s:s + args.batch_size] for s in range(0, len(order), args.batch_size)]
    for dtype in ("float32", "bfloat16"):
        encoder = DenseEncoder("bundled:minilm", threads=args.threads, device="cpu", dtype=dtype)
        encoder._encode_torch(texts[:64], [list(range(64))], np.zeros((64, encoder.dimension), np.float32))
        began = time.perf_counter()
        found = encoder._encode_torch(texts, batches, np.zeros_like(reference))
        rate = args.passages / (time.perf_counter() - began)
        gap = float(1 - np.min(np.sum(found * reference, axis=1)))
        print(f"prefetched, {dtype}: {rate:.1f} passages/s, largest 1 - cosine {gap:.2e}, "
              f"largest difference {float(np.abs(found - reference).max()):.2e}")


if __name__ == "__main__":
    main()
