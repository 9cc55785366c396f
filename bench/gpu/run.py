"""ikatkit's GPU paths measured on one CUDA GPU through ikatkit's own classes (issue 59): one command,

    python bench/gpu/run.py [--out DIR] [--budget SECONDS] [--turns N] [--rehearse]

Models are of the real shapes with random weights, built on the GPU (bench/gpu/shapes.py; nothing is downloaded):
all-MiniLM-L6-v2 (the dense encoder and the bi-encoder ranker), MiniLM-L6 and -L12 cross-encoders, SPLADE++'s
BERT-base masked LM (issue 60), Llama-2-7B and Llama-3-8B; the organizers' SPLADE index is a synthetic one in their
layout (issue 68). Beside each figure it writes the limit the hardware sets, from the GPU's matrix rate and copy
bandwidth measured first in the same run. Results: DIR/gpu.json (default
``$OUT``, else bench/gpu/out), written after each part, so a run cut short keeps what it measured; parts that would
pass ``--budget`` are skipped, said so. Without a CUDA GPU it exits at once (status 2) with one line saying it needs
one; ``--rehearse`` runs every part on the CPU at toy sizes instead (a tiny Llama for the 7B and 8B shapes, SPLADE
and the cross-encoders cut to 2 layers), so that a script error shows here, not in the GPU machine's minutes (a
test runs it). It needs ikatkit's source beside it (``src/`` is put on the path) and the image's torch, transformers and
sentence-transformers; the 4-bit part runs where bitsandbytes imports (carry its wheel).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NEEDS = "bench/gpu/run.py needs a CUDA GPU (PyTorch sees none here); docs/benchmarks.md#gpu says how it runs"
QUERY = "w1 w2 w3 protein marathon runner"


@dataclass(frozen=True)
class Target:
    """Where the parts run: the GPU at the real sizes, or (a rehearsal) the CPU at toy sizes."""

    rehearsal: bool = False

    @property
    def device(self) -> str:
        return "cpu" if self.rehearsal else "cuda"

    def count(self, real: int, toy: int) -> int:
        return toy if self.rehearsal else real

    def shape(self, real: str) -> str:
        """The Llama shape the part builds: ``real``, or the tiny one in a rehearsal."""
        return "tiny" if self.rehearsal else real


RUN = Target()  # main() sets it


class Bench:
    def __init__(self, out: Path, budget: float) -> None:
        self.out, self.budget, self.start = out, budget, time.time()
        self.results: dict[str, Any] = {}

    def part(self, name: str, needs: float, work: Callable[[], dict[str, Any]]) -> None:
        """Run ``work`` as part ``name`` unless fewer than ``needs`` seconds of the budget are left."""
        left = self.budget - (time.time() - self.start)
        if left < needs:
            self.results[name] = {"skipped": f"{left:.0f} s of the budget left, the part needs about {needs:.0f}"}
        else:
            began = time.time()
            try:
                self.results[name] = work()
            except Exception as err:  # a part that fails is recorded; the others still run
                self.results[name] = {"error": f"{type(err).__name__}: {err}"[:800],
                                      "trace": traceback.format_exc()[-1500:]}
            self.results[name]["seconds"] = round(time.time() - began, 1)
        print(json.dumps({name: self.results[name]}), flush=True)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "gpu.json").write_text(json.dumps(self.results, indent=1), encoding="utf-8")


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    import torch

    sync = torch.cuda.synchronize if RUN.device == "cuda" else (lambda: None)
    sync()
    began = time.perf_counter()
    value = fn()
    sync()
    return value, time.perf_counter() - began


def ceilings() -> dict[str, Any]:
    """The GPU's bf16/fp16 matrix rate (8192^3 products) and device-to-device copy bandwidth, measured here."""
    import torch

    rates = {}
    side, size = RUN.count(8192, 128), RUN.count(2 ** 30, 2 ** 22)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        a = torch.randn(side, side, device=RUN.device, dtype=dtype)
        for _ in range(3):
            a @ a
        _, seconds = timed(lambda: [a @ a for _ in range(10)])
        rates[str(dtype).removeprefix("torch.")] = round(10 * 2 * side ** 3 / seconds / 1e12, 4)
    block = torch.empty(size, dtype=torch.uint8, device=RUN.device)
    copy = torch.empty_like(block)
    copy.copy_(block)
    _, seconds = timed(lambda: [copy.copy_(block) for _ in range(10)])
    return {"matmul_tflops": rates, "copy_tb_s_read_plus_write": round(10 * 2 * size / seconds / 1e12, 4)}


def environment() -> dict[str, Any]:
    import sentence_transformers
    import torch
    import transformers

    if RUN.rehearsal:
        gpu: dict[str, Any] = {"gpu": "none: a rehearsal on the CPU (toy sizes; no figure means anything)"}
    else:
        props = torch.cuda.get_device_properties(0)
        gpu = {"gpu": props.name, "memory_gib": round(props.total_memory / 2 ** 30, 1)}
    return {**gpu, "cpus": os.cpu_count(),
            "torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **ceilings()}


def encoder_limit(tokens: float, layers: int, rate_tflops: float, hidden: int = 384, inner: int = 1536,
                  head: int = 0) -> float:
    """Passages a second a BERT encoder (MiniLM's width by default) of ``layers`` layers could encode at
    ``rate_tflops`` (matrix work only): 2 FLOP per weight and token, attention's 4 * tokens * hidden per token and
    layer, and ``head`` weights a token after the last layer (SPLADE's MLM head: transform and vocabulary)."""
    per_token = layers * (2 * (4 * hidden * hidden + 2 * hidden * inner) + 4 * tokens * hidden) + 2 * head
    return rate_tflops * 1e12 / (per_token * tokens)


def dense_encoder(work: Path, env: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from ikatkit.index.encode import DenseEncoder
    import shapes

    folder = shapes.minilm(work / "minilm-bi", "bi")
    texts = shapes.passages(RUN.count(60_000, 32))
    fast = DenseEncoder(str(folder), device=RUN.device)
    tokens = float(np.mean([len(ids) for ids in fast.model.tokenizer(texts[:2000])["input_ids"]]))
    fast.encode(texts[:4096])
    half, seconds = timed(lambda: fast.encode(texts))
    exact = DenseEncoder(str(folder), device=RUN.device, dtype="float32")
    exact.encode(texts[:1024], batch_size=256)
    full, seconds32 = timed(lambda: exact.model.encode(texts[:20_000], batch_size=256, normalize_embeddings=True,
                                                       convert_to_numpy=True, show_progress_bar=False))
    began = time.perf_counter()
    fast.model.preprocess(texts[:20_000])
    tokenize = 20_000 / (time.perf_counter() - began)
    rate = len(texts) / seconds
    return {"placement": fast.placement.identity(), "passages": len(texts), "mean_tokens": round(tokens, 1),
            "passages_per_s": round(rate), "hours_for_116.8M": round(116.8e6 / rate / 3600, 2),
            "fp32_encode_b256_passages_per_s": round(20_000 / seconds32),
            "min_cosine_vs_fp32": float(np.min(np.sum(half[:20_000] * full, axis=1))),
            "tokenize_passages_per_s": round(tokenize),
            "limit_passages_per_s_fp16_matmul": round(encoder_limit(tokens, 6, env["matmul_tflops"]["float16"]))}


def splade_encoder(work: Path, env: dict[str, Any]) -> dict[str, Any]:
    """SPLADE++'s shape (issue 60) through ``index.splade.SparseEncoder`` on CUDA, passages and queries, in float32
    (``index sparse``'s default) and in float16 and bfloat16 (``--dtype``: their speed, and how near their quantized
    vectors are to float32's, ``splade_random.agreement``), against the matrix rate's limit of each."""
    import numpy as np

    from ikatkit.index.sparse_encoder import SparseEncoder
    import shapes
    from splade_random import agreement

    folder = shapes.splade(work / "splade", layers=RUN.count(12, 2))
    texts = shapes.passages(RUN.count(4096, 16))
    hidden, vocabulary = shapes.BERT_BASE["hidden_size"], shapes.BERT_BASE["vocab_size"]
    result: dict[str, Any] = {"passages": len(texts)}
    found = {}
    for dtype in ("float32", "bfloat16") if RUN.rehearsal else ("float32", "float16", "bfloat16"):
        encoder = SparseEncoder(str(folder), device=RUN.device, dtype=dtype)
        tokens = float(np.mean([len(ids) for ids in encoder.tokenizer(texts[:1000])["input_ids"]]))
        encoder.encode(texts[:256], batch_size=64)
        found[dtype], seconds = timed(lambda: encoder.encode(texts, batch_size=64))
        asked = RUN.count(256, 8)
        queries, query_seconds = timed(lambda: encoder.encode_queries([QUERY] * asked))
        rate = len(texts) / seconds
        row = {"placement": encoder.placement.identity(), "mean_tokens": round(tokens, 1),
               "passages_per_s": round(rate, 1), "hours_for_116.8M": round(116.8e6 / rate / 3600, 1),
               "terms_per_passage": round(float(np.mean([len(v) for v in found[dtype]])), 1),
               "queries_per_s": round(asked / query_seconds, 1), "terms_per_query": len(queries[0]),
               "limit_passages_per_s_matmul": round(encoder_limit(tokens, 12, env["matmul_tflops"][dtype], hidden,
                                                                  4 * hidden, hidden * (hidden + vocabulary)))}
        if dtype == "float32":  # the agreement's queries, float32 as a search encodes them
            reference = encoder.encode_queries(shapes.passages(20, 12, seed=4))
        else:
            row["against_float32"] = agreement(found["float32"], found[dtype], reference)
        result[dtype] = row
    return result


def sparse_hdf5_search(work: Path) -> dict[str, Any]:
    """The organizers' SPLADE index (issue 68) searched on the GPU (``HDF5SparseSearcher(device="cuda")``: every list
    copied to the GPU once, one ``index_add_`` a query term) against the numba kernel on every CPU core, on a synthetic
    index in their layout of SPLADE++'s sparsity (``bench/bench_sparse_hdf5.py``; 2M passages, in a rehearsal 5,000
    rows over 2,000 terms): one query at a time, k = 1,000, the same top 1,000 ids and scores on both."""
    import numpy as np

    if importlib.util.find_spec("h5py") is None or importlib.util.find_spec("numba") is None:
        return {"skipped": "h5py or numba is not installed (ikatkit's sparse extra: carry their wheels)"}
    from ikatkit.index.sparse_hdf5 import open_hdf5_index, write_hdf5_index
    from ikatkit.retrieve.sparse_hdf5 import HDF5SparseSearcher

    folder = work / "organizers-splade"
    rng = np.random.default_rng(0)
    if RUN.rehearsal:
        rows, terms = rng.integers(0, 5000, 300_000), rng.integers(0, 2000, 300_000)
        keep = np.unique(rows * 2000 + terms, return_index=True)[1]
        write_hdf5_index(folder, [f"clueweb22-en0000-00-{i:05d}:0" for i in range(5000)], rows[keep], terms[keep],
                         rng.lognormal(-0.5, 0.7, len(keep)))
        vectors = [{int(t): float(w) for t, w in zip(rng.choice(2000, 40, replace=False), rng.random(40) + 0.1)}
                   for _ in range(4)]
    else:
        import bench_sparse_hdf5 as synthetic

        synthetic.build(folder, 2_000_000)
        vectors = synthetic.queries(20)
    index = open_hdf5_index(folder)
    cpu = HDF5SparseSearcher(index, threads=os.cpu_count())
    device, copied = timed(lambda: HDF5SparseSearcher(index, device="torch:cpu" if RUN.rehearsal else "cuda"))
    result: dict[str, Any] = {"passages": index.count, "postings": int(index.stats()["postings"]),
                              "cpu_threads": os.cpu_count(), "copy_to_device_s": round(copied, 2)}
    found: dict[str, list[Any]] = {}
    for name, searcher in (("cpu_kernel", cpu), ("device", device)):
        searcher.search_vectors({"warm-up": vectors[0]}, 1000)
        found[name], times = [], []
        for vector in vectors:
            hits, seconds = timed(lambda: searcher.search_vectors({"q": vector}, 1000)["q"])
            found[name].append(hits)
            times.append(seconds)
        result[f"{name}_query_ms_median"] = round(1000 * statistics.median(times), 2)
    same = sum(ours == theirs for ours, theirs in zip(found["cpu_kernel"], found["device"]))
    result["same_top_1000"] = f"{same} of {len(vectors)}"
    return result


def bi_encoder(work: Path, env: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from ikatkit.rank.biencoder import BiEncoder
    import shapes

    folder = work / "minilm-bi" / "st"
    texts = shapes.passages(RUN.count(30_000, 32), seed=1)
    ranker = BiEncoder(str(folder), device=RUN.device, batch_size=256, cache_dir=work / "emb")
    ranker.encode_new(texts[:1024])
    vectors, seconds = timed(lambda: ranker.encode_new(texts))
    query = ranker.encode_new([QUERY])[QUERY]
    diffs = [abs(float(vectors[t] @ query) - float(ranker._run([t])[0] @ query)) for t in texts[:300]]
    return {"placement": ranker.placement.identity(), "batch_size": ranker.batch_size,
            "passages_per_s": round(len(texts) / seconds),
            "max_score_diff_vs_batch1_fp32_300": float(np.max(diffs)),
            "limit_passages_per_s_fp32_matmul": round(encoder_limit(140, 6, env["matmul_tflops"]["float32"]))}


def cross_encoder(work: Path, layers: int) -> dict[str, Any]:
    import numpy as np

    from ikatkit.rank.crossencoder import CrossEncoderRanker
    import shapes

    folder = shapes.minilm(work / f"minilm-cross-{layers}", "cross", layers=RUN.count(layers, 2))
    pairs = [(QUERY, text) for text in shapes.passages(RUN.count(1000, 16), seed=2)]
    result: dict[str, Any] = {}
    scores = {}
    fast = "bfloat16" if RUN.rehearsal else "auto"  # a rehearsal's half-precision path is the GPU's torch path
    for dtype in (fast, "float32"):
        ranker = CrossEncoderRanker(str(folder), device=RUN.device, batch_size=256, dtype=dtype,
                                    backend="torch")  # keeps no scores
        ranker.score(pairs[:256])
        runs = []
        for _ in range(RUN.count(5, 1)):
            scores[dtype], seconds = timed(lambda: ranker.score(pairs))
            runs.append(seconds)
        result[ranker.placement.dtype] = {"rerank_1000_ms_median_of_5": round(1000 * statistics.median(runs), 1)}
    top = [list(np.argsort(-np.array(scores[d]))[:10]) for d in (fast, "float32")]
    result["top10_same_as_fp32"] = top[0] == top[1]
    result["max_score_diff_vs_fp32"] = float(np.max(np.abs(np.array(scores[fast]) - np.array(scores["float32"]))))
    return result


def generation(work: Path, env: dict[str, Any], shape: str, decodings: tuple[str, ...],
               quantization: str | None = None) -> dict[str, Any]:
    """Tokens a second of TransformersLLM at batch 1 and 8 (128 new tokens, greedy; every row runs to the end:
    no end token is in reach of random weights in 128 steps), per decoding; the batch-1 limit is reading the
    weights once a token at the measured copy bandwidth (read only: half the read-plus-write figure)."""
    import torch

    from ikatkit.llm.hf import TransformersLLM
    import shapes

    folder = work / RUN.shape(shape)
    if not (folder / "config.json").exists():
        shapes.llama(folder, RUN.shape(shape), dtype=torch.float16 if RUN.device == "cuda" else None,
                     device=RUN.device)
        torch.cuda.empty_cache()
    prompt = [{"role": "system", "content": "w1 w2 w3"}, {"role": "user", "content": " ".join(shapes.WORDS[:150])}]
    result: dict[str, Any] = {}
    for decoding in decodings:
        llm = TransformersLLM(str(folder), quantization=quantization, decoding=decoding, max_new_tokens=128,
                              batch_size=8)
        weights = sum(p.numel() * p.element_size() for p in llm.network.parameters())
        llm.chat([prompt + [{"role": "user", "content": "w7"}]])  # warm-up (and compilation)
        row: dict[str, Any] = {"placement": llm.identity(), "weights_gb": round(weights / 1e9, 2)}
        for batch in (1, 8):
            prompts = [prompt + [{"role": "user", "content": f"w{100 + i + 10 * batch}"}] for i in range(batch)]
            before = llm.stats["completion_tokens"]
            _, seconds = timed(partial(llm.chat, prompts))
            row[f"batch{batch}_tokens_per_s"] = round((llm.stats["completion_tokens"] - before) / seconds, 1)
        row["limit_batch1_tokens_per_s"] = round(env["copy_tb_s_read_plus_write"] / 2 * 1e12 / weights, 1)
        result[decoding] = row
        del llm
        torch.cuda.empty_cache()
    return result


def rtg_turns(work: Path, turns: int) -> dict[str, Any]:
    """RtG turns end to end on the GPU, as the stages call the classes: a rewrite (32 new tokens) by the 7B shape,
    1,000 candidates re-ranked by the MiniLM-L12 cross-encoder, a 250-token answer; BM25 is not on this machine
    (its share comes from the CPU benchmarks)."""
    from ikatkit.llm.hf import TransformersLLM
    from ikatkit.rank.crossencoder import CrossEncoderRanker
    import shapes

    llm = TransformersLLM(str(work / RUN.shape("llama-2-7b")), max_new_tokens=250, batch_size=1)
    ranker = CrossEncoderRanker(str(work / "minilm-cross-12"), device=RUN.device, batch_size=256, backend="torch")
    count = RUN.count(1000, 16)
    candidates = shapes.passages(count, seed=3)
    llm.chat([[{"role": "user", "content": "w1"}]], max_new_tokens=8)
    split: dict[str, list[float]] = {"rewrite": [], "rerank": [], "answer": [], "total": []}
    for turn in range(turns):
        utterance = " ".join(shapes.WORDS[turn * 20: turn * 20 + 20])
        rewrite, a = timed(lambda: llm.chat([[{"role": "user", "content": utterance}]], max_new_tokens=32)[0])
        scores, b = timed(lambda: ranker.score([(rewrite or utterance, text) for text in candidates]))
        top = [candidates[i] for i in sorted(range(count), key=lambda i: -scores[i])[:3]]
        _, c = timed(lambda: llm.chat([[{"role": "user", "content": " ".join([utterance, *top])}]]))
        for name, value in zip(split, (a, b, c, a + b + c)):
            split[name].append(value)

    def p(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 3)

    return {"turns": turns, **{name: {"p50_s": p(v, 0.5), "p95_s": p(v, 0.95)} for name, v in split.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or HERE / "out"))
    parser.add_argument("--budget", type=float, default=500, help="seconds the whole run may take (default 500)")
    parser.add_argument("--turns", type=int, default=5, help="RtG turns timed end to end (default 5)")
    parser.add_argument("--rehearse", action="store_true",
                        help="every part on the CPU at toy sizes (no figure means anything): the script checked "
                             "before the GPU machine's minutes are spent")
    args = parser.parse_args(argv)
    global RUN
    RUN = Target(rehearsal=args.rehearse)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not (args.rehearse or torch.cuda.is_available()):
        print(NEEDS, file=sys.stderr)
        return 2
    sys.path[:0] = [str(HERE.parents[1] / "src"), str(HERE), str(HERE.parent)]  # src, shapes, splade_random
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path("/dev/shm/ikatkit-gpu" if Path("/dev/shm").is_dir() else "/tmp/ikatkit-gpu")
    if args.rehearse:  # toy models in a folder of their own, removed after; no budget (nothing is measured)
        work = Path(tempfile.mkdtemp(prefix="ikatkit-gpu-rehearsal-"))
    os.environ.setdefault("IKATKIT_CACHE", str(work / "cache"))
    try:
        return run_parts(Bench(args.out, math.inf if args.rehearse else args.budget), work, args)
    finally:
        if args.rehearse:
            shutil.rmtree(work, ignore_errors=True)


def run_parts(bench: Bench, work: Path, args: argparse.Namespace) -> int:
    """Every part in turn, each recorded by ``bench`` (in a rehearsal, at toy sizes on the CPU)."""
    bench.part("environment", 10, environment)
    env = bench.results["environment"]
    if "error" in env:
        return 1
    bench.part("dense_encoder_minilm_l6", 40, lambda: dense_encoder(work, env))
    bench.part("bi_encoder_minilm_l6", 30, lambda: bi_encoder(work, env))
    bench.part("cross_encoder_minilm_l6", 20, lambda: cross_encoder(work, 6))
    bench.part("splade_encoder_bert_base", 40, lambda: splade_encoder(work, env))
    bench.part("sparse_hdf5_search", 90, lambda: sparse_hdf5_search(work))
    bench.part("cross_encoder_minilm_l12", 20, lambda: cross_encoder(work, 12))
    bench.part("llama_2_7b_fp16", 120, lambda: generation(work, env, "llama-2-7b", ("eager", "static")))

    def four_bit() -> dict[str, Any]:
        if args.rehearse:
            return {"skipped": "a rehearsal runs no 4-bit part (bitsandbytes quantizes on CUDA)"}
        if importlib.util.find_spec("bitsandbytes") is None:
            return {"skipped": "bitsandbytes is not installed (carry its wheel)"}
        return generation(work, env, "llama-2-7b", ("eager",), "4bit")

    bench.part("llama_2_7b_4bit", 60, four_bit)
    bench.part("rtg_turn_end_to_end", 20 + 10 * args.turns, lambda: rtg_turns(work, args.turns))
    bench.part("llama_3_8b_fp16", 120, lambda: generation(work, env, "llama-3-8b", ("eager", "static")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
