"""Dense encoding and search: ``build_dense`` on local Ray with 1 and 2 workers (1 thread each) against the
anchor, sentence-transformers' own ``encode`` loop in one process on every core (the same passages, the same
run); then faiss Flat against IVF-PQ search at ``--vectors`` synthetic unit vectors.

    python bench/bench_dense.py --passages 4000 --vectors 1000000

Passages are synthetic ClueWeb22-style passages of ``--sentences`` sentences (10: about the length of iKAT's),
written as a stream; the anchor keeps only its ``--anchor-passages`` in memory. Encoding
passages/s counts the whole job (text shards, Ray actors, float16 shards, faiss Flat) after one warm-up that
converts the model for OpenVINO; peak RSS is the whole process tree (driver, Ray's processes, actors).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from common import ProcessTree, sentence, timed  # noqa: E402


def write_passages(path: Path, count: int, seed: int = 0, sentences: int = 10, keep: int | None = None) -> list[str]:
    """Write ``count`` passages of ``sentences`` sentences as passage JSONL, streaming; return the first ``keep``."""
    rng = random.Random(seed)
    kept: list[str] = []
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            text = " ".join(sentence(rng) for _ in range(sentences))
            out.write(json.dumps({"id": f"clueweb22-en0000-00-{i // 20:05d}:{i % 20}", "contents": text}) + "\n")
            if keep is None or i < keep:
                kept.append(text)
    return kept


def anchor_rate(texts: list[str], batch_size: int) -> float:
    """Passages/s of sentence-transformers' own ``encode`` loop in this process, on every core."""
    from sentence_transformers import SentenceTransformer

    from ikatkit.models import resolve_model

    model = SentenceTransformer(resolve_model("bundled:minilm"), device="cpu")
    seconds, _ = timed(lambda: model.encode(texts, batch_size=batch_size, normalize_embeddings=True))
    print(f"anchor SentenceTransformer.encode, 1 process, {os.cpu_count()} threads: {len(texts) / seconds:.1f} psg/s "
          f"({len(texts)} passages in {seconds:.1f} s)", flush=True)
    return len(texts) / seconds


def encode_bench(args: argparse.Namespace, work: Path) -> None:
    from ikatkit.index.dense import build_dense
    from ikatkit.raycluster import connect

    source = work / "passages.jsonl"
    anchor = anchor_rate(write_passages(source, args.passages, sentences=args.sentences, keep=args.anchor_passages),
                         args.batch_size)
    connect(None)
    warm = work / "warm.jsonl"
    write_passages(warm, 64, seed=1)
    build_dense([warm], work / "warm", shard_size=64)  # converts the model for OpenVINO, starts Ray's pools once
    for backend in args.backends.split(","):
        for workers in map(int, args.workers.split(",")):
            out = work / f"dense-{backend}-{workers}"
            with ProcessTree() as tree:
                seconds, _ = timed(lambda: build_dense([source], out, batch_size=args.batch_size, backend=backend,
                                                       workers=workers, shard_size=args.shard_size))
            rate = args.passages / seconds
            print(f"build_dense {backend}, {workers} Ray worker(s) x 1 thread: {rate:.1f} psg/s, ratio vs anchor "
                  f"{rate / anchor:.2f}x, peak RSS {tree.peak_rss_mib['total']:.0f} MiB (driver "
                  f"{tree.peak_rss_mib['self']:.0f}), {seconds:.1f} s", flush=True)
            shutil.rmtree(out)


def search_bench(args: argparse.Namespace) -> None:
    import faiss

    rng = np.random.default_rng(0)
    dimension = 384
    vectors = rng.standard_normal((args.vectors, dimension), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[rng.choice(args.vectors, args.queries, replace=False)] + 0.05 * rng.standard_normal(
        (args.queries, dimension), dtype=np.float32)
    results = {}
    for spec in ("Flat", f"IVF{args.lists},PQ48"):
        index = faiss.index_factory(dimension, spec, faiss.METRIC_INNER_PRODUCT)
        train_s, _ = timed(lambda: index.train(vectors[:min(args.vectors, 100 * args.lists)]))
        add_s, _ = timed(lambda: index.add(vectors))
        if spec != "Flat":
            index.nprobe = args.nprobe
        search_s, (_, found) = timed(lambda: index.search(queries, 100))
        results[spec] = found
        print(f"faiss {spec}{f' nprobe {args.nprobe}' if spec != 'Flat' else ''}: {args.queries / search_s:.1f} q/s "
              f"(k=100, {args.vectors} vectors, train {train_s:.1f} s, add {add_s:.1f} s)", flush=True)
    flat, ivf = results.values()
    recall = np.mean([len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(flat, ivf)])
    print(f"IVF-PQ recall@10 of Flat's top 10: {recall:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=2000, help="passages to encode (1M is the issue's size)")
    parser.add_argument("--sentences", type=int, default=10, help="sentences per passage (10: about iKAT's length)")
    parser.add_argument("--anchor-passages", type=int, help="encode only the first N passages in the anchor")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--backends", default="openvino,torch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shard-size", type=int, default=1000)
    parser.add_argument("--vectors", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--lists", type=int, default=4096)
    parser.add_argument("--nprobe", type=int, default=32)
    parser.add_argument("--skip", choices=["encode", "search"], help="run only the other part")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-dense-") as tmp:
        if args.skip != "encode":
            encode_bench(args, Path(tmp))
    if args.skip != "search":
        search_bench(args)
    return 0


if __name__ == "__main__":
    started = time.time()
    code = main()
    print(f"total {time.time() - started:.0f} s")
    sys.exit(code)
