"""Latency of the interactive task: seconds per turn (p50/p95) and the split by stage, over the iKAT 2023 test
conversations replayed by the local simulator (`ikatkit simulate`'s app in a thread, real HTTP on loopback), with
the HTTP overhead measured separately.

Configs (over a Lucene index of the 894 real 2023 provenance passages):
- ``bm25-ce``: BM25 top-100 -> cross-encoder re-rank of the top ``--depth`` (10) -> extractive answer. No MS MARCO
  cross-encoder ships offline: the cross-encoder is the bundled MiniLM-L6 with an untrained one-logit head, the
  architecture and cost of cross-encoder/ms-marco-MiniLM-L-6-v2 (its scores are meaningless: latency only).
- ``bm25-ce-tiny``: the same over the top ``--tiny-depth`` (all 100) with a cross-encoder of the shape of
  cross-encoder/ms-marco-TinyBERT-L-2-v2 (2 layers, hidden 128; untrained: latency only).
- ``bm25-bi``: BM25 top-100 -> bundled MiniLM bi-encoder re-rank of the top ``--depth`` -> extractive answer.
- ``bm25``: configs/interactive_extractive.toml (BM25 top-100 -> extractive answer, no model): the floor.
- ``demo``: configs/demo.toml (SmolLM2-135M rewrite and answer, MiniLM PTKB and re-rank), on ``--demo-conversations``.

HTTP: each turn's ``/run/continue`` round trip (the client's time in the call, the simulator's work included) and,
as the anchor, a client that answers every utterance of the same conversations with an empty response (no pipeline:
the server path alone). The HTTP share is HTTP p50 / (pipeline p50 + HTTP p50).

    PYTHONPATH=src python bench/bench_interactive.py [--data ../shared/ikat/2023] [--work .cache/bench-interactive]
        [--configs bm25 ...] [--index /work/scale-indexes/r2000000/index] [--bm25-threads 2] [--depth 50]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
from common import provenance_jsonl

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TOKEN = "bench-token"

PIPELINE = """name = "{name}"
description = "BM25 top-100, {ranker} re-rank of the top {depth}, extractive answer"

[resources.bm25]
kind = "bm25"

[resources.ranker]
kind = "{kind}"
model = "{model}"
{options}
[[stages]]
stage = "raw_query"

[[stages]]
stage = "retrieve"
k = 100
expand_ptkb = false

[[stages]]
stage = "rerank"
ranker = "ranker"
depth = {depth}

[[stages]]
stage = "respond"
task = "extractive"
passages = 3
"""


def percentiles(values: list[float]) -> tuple[float, float]:
    return float(np.percentile(values, 50)), float(np.percentile(values, 95))


def serve(sim):
    import uvicorn

    from ikatkit.simulate.server import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(sim), host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"


def anchor(url: str, run_id: str) -> list[float]:
    """Seconds per /run/continue with empty responses: the HTTP path without a pipeline."""
    from ikatkit.interactive.client import ApiClient

    client = ApiClient(url, TOKEN)
    message, seconds = client.start(run_id, "HTTP anchor: empty responses", {}), []
    while message is not None and not message["last_response_of_run"]:
        start = time.perf_counter()
        message = client.continue_(run_id, "", {}, {})
        seconds.append(time.perf_counter() - start)
    client.close()
    return seconds


def index_of(data: Path, work: Path) -> Path:
    from ikatkit.index.build import build_index

    folder = work / "index-2023-894"
    if (folder / "manifest.json").exists():
        return folder
    build_index([provenance_jsonl(data, work / "passages.jsonl")], folder, threads=2)
    return folder


def with_threads(config: str, threads: int) -> str:
    """A config's text with its BM25 resource on ``threads`` threads (0: as written)."""
    return config.replace('kind = "bm25"\n', f'kind = "bm25"\nthreads = {threads}\n', 1) if threads else config


def cross_encoder(work: Path, tiny: bool = False) -> Path:
    """A cross-encoder with an untrained one-logit head (scores meaningless: latency only), saved once under ``work``:
    the bundled MiniLM-L6 (the architecture of cross-encoder/ms-marco-MiniLM-L-6-v2), or with ``tiny`` a 2-layer
    BERT of hidden size 128 with MiniLM's tokenizer (the architecture of cross-encoder/ms-marco-TinyBERT-L-2-v2)."""
    import torch
    from sentence_transformers import CrossEncoder
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from ikatkit.models import resolve_model

    folder = work / ("tinybert-l2-untrained-ce" if tiny else "minilm-l6-untrained-ce")
    if not folder.exists():
        torch.manual_seed(0)
        minilm = resolve_model("bundled:minilm")
        if tiny:
            config = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512,
                                num_labels=1)
            BertForSequenceClassification(config).save_pretrained(folder)
            AutoTokenizer.from_pretrained(minilm).save_pretrained(folder)
        else:
            CrossEncoder(minilm, num_labels=1).save(str(folder))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared/ikat/2023"))
    parser.add_argument("--work", default=".cache/bench-interactive")
    parser.add_argument("--conversations", type=int, default=0, help="first N 2023 conversations (0 = all 25)")
    parser.add_argument("--demo-conversations", type=int, default=2, help="conversations for configs/demo.toml")
    parser.add_argument("--configs", nargs="+", default=["bm25", "bm25-bi", "bm25-ce", "bm25-ce-tiny", "demo"])
    parser.add_argument("--ce-threads", type=int, default=0,
                        help="OpenVINO threads of the cross-encoders (0: its choice)")
    parser.add_argument("--ce-max-length", type=int, default=512, help="tokens of a (query, passage) pair kept")
    parser.add_argument("--depth", type=int, default=10, help="candidates the MiniLM models re-rank per turn")
    parser.add_argument("--tiny-depth", type=int, default=100, help="candidates the TinyBERT-shaped one re-ranks")
    parser.add_argument("--bm25-threads", type=int, default=0,
                        help="threads of the BM25 resource (1: one thread; 2+: a turn's query alone in parts on an "
                             "index of PARALLEL_FROM documents or more; 0: the config's)")
    parser.add_argument("--index", type=Path, help="search this Lucene index instead of the 894 real passages' (e.g. "
                                                   "a realistic collection of bench_scale.py: latency at its size)")
    args = parser.parse_args()
    from ikatkit.interactive.driver import run_interactive
    from ikatkit.simulate.server import Simulator
    from ikatkit.simulate.users import replay_users
    from ikatkit.topics import load_topics

    os.environ["IKAT_API_TOKEN"] = TOKEN
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    index = args.index or index_of(Path(args.data), work)
    all_topics = load_topics(Path(args.data) / "test_topics.json")
    options = f"max_length = {args.ce_max_length}\n" + (f"threads = {args.ce_threads}\n" if args.ce_threads else "")
    configs = {  # built on use: the cross-encoders are saved under --work the first time
        "bm25-ce": lambda: PIPELINE.format(name="bm25-ce", ranker="cross-encoder (MiniLM-L6, untrained head)",
                                           kind="cross-encoder", model=cross_encoder(work), depth=args.depth,
                                           options=options),
        "bm25-ce-tiny": lambda: PIPELINE.format(name="bm25-ce-tiny",
                                                ranker="cross-encoder (TinyBERT-L2 shape, untrained)",
                                                kind="cross-encoder", model=cross_encoder(work, tiny=True),
                                                depth=args.tiny_depth, options=options),
        "bm25-bi": lambda: PIPELINE.format(name="bm25-bi", ranker="MiniLM bi-encoder", kind="bi-encoder",
                                           model="bundled:minilm", depth=args.depth, options=""),
    }
    rows = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in args.configs:
        n = args.demo_conversations if name == "demo" else args.conversations
        ids = [c.id for c in all_topics.conversations][: n or None]
        topics = all_topics.subset(ids)
        if name == "demo":
            config = Path(__file__).resolve().parents[1] / "configs" / "demo.toml"
        else:
            config = work / f"{name}.toml"
            text = (Path(__file__).resolve().parents[1] / "configs" / "interactive_extractive.toml").read_text(
                encoding="utf-8") if name == "bm25" else configs[name]()
            config.write_text(with_threads(text, args.bm25_threads), encoding="utf-8")
        sim = Simulator(replay_users(topics), {TOKEN: "bench"})
        server, thread, url = serve(sim)
        try:
            start = time.perf_counter()
            outcome = run_interactive(config, url, f"{name}-{stamp}", work / f"{name}-{stamp}", index=index,
                                      progress=False)
            wall = time.perf_counter() - start
            empty = anchor(url, f"anchor-{name}-{stamp}")
        finally:
            server.should_exit = True
            thread.join()
        turns = [json.loads(path.read_text()) for path in sorted((outcome.run_file.parent / "turns").glob("*/*.json"))]
        turns = [t for t in turns if "sent" in t]  # turns/<user>/<topic>_<n>.json, as the run's store writes them
        pipeline = [sum(t["seconds"].values()) for t in turns]
        http = [t["http_seconds"] for t in turns]
        stages: dict[str, list[float]] = {}
        for t in turns:
            for stage, value in t["seconds"].items():
                stages.setdefault(stage, []).append(value)
        p50, p95 = percentiles(pipeline)
        h50, h95 = percentiles(http)
        a50, a95 = percentiles(empty)
        rows.append({"config": name, "index": str(index), "bm25_threads": args.bm25_threads,
                     "load_average": os.getloadavg(), "conversations": len(ids), "turns": len(turns),
                     "wall_s": round(wall, 1),
                     "pipeline_p50": p50, "pipeline_p95": p95,
                     "turn_p50": float(np.percentile(np.add(pipeline, http), 50)),
                     "turn_p95": float(np.percentile(np.add(pipeline, http), 95)),
                     "http_p50": h50, "http_p95": h95, "anchor_http_p50": a50, "anchor_http_p95": a95,
                     "http_share_p50": h50 / (p50 + h50),
                     "stages_p50": {s: float(np.percentile(v, 50)) for s, v in stages.items()},
                     "stages_p95": {s: float(np.percentile(v, 95)) for s, v in stages.items()}})
        print(json.dumps(rows[-1]), flush=True)
    print("\n| config | turns | turn p50 / p95 s | pipeline p50 / p95 s | HTTP p50 / p95 ms | anchor (empty) "
          "p50 / p95 ms | HTTP share | stage p50 / p95 s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        split = ", ".join(f"{s} {r['stages_p50'][s]:.3f}/{r['stages_p95'][s]:.3f}" for s in r["stages_p50"])
        print(f"| {r['config']} | {r['turns']} ({r['conversations']} conv.) | {r['turn_p50']:.3f} / "
              f"{r['turn_p95']:.3f} | {r['pipeline_p50']:.3f} / {r['pipeline_p95']:.3f} | "
              f"{1000 * r['http_p50']:.1f} / {1000 * r['http_p95']:.1f} | {1000 * r['anchor_http_p50']:.1f} / "
              f"{1000 * r['anchor_http_p95']:.1f} | {100 * r['http_share_p50']:.1f}% | {split} |")
    (work / f"results-{stamp}.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    sys.exit(main())
