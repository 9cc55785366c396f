"""Bi-encoder re-ranking of a year (iKAT 2023 test, 332 turns, resolved utterances, BM25 top-100 over the
894 real provenance passages) against today's anchor, one text at a time with PyTorch's default threads (the
bi-encoder before length-sorted batches), measured in the same run on the first ``--anchor-turns`` turns,
where both start with nothing cached and must give the same rankings and the same score bits; the anchor
also runs on one thread, to show how much of the ratio is batching and how much threads; the OpenVINO
backend (``backend = "openvino"``, 1 and 2 threads) must give the same rankings (its scores differ from
PyTorch's in the last bits). Wall and CPU
seconds are both reported: on a shared machine the CPU seconds depend less on the other processes. Then the
manual bi-encoder config run twice through the CLI into fresh folders with one cache: the warm rerun must
write byte-identical run files (goal: under 30 s).

    python bench/bench_biencoder.py [--anchor-turns 2] [--data ../shared/ikat/2023]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import provenance_jsonl, provenance_texts, timed  # noqa: E402

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "manual_biencoder.toml"


class OneAtATime:
    """The anchor: the bi-encoder as it was, each new text encoded alone, kept in memory by text."""

    def __init__(self, model: str) -> None:
        from sentence_transformers import SentenceTransformer

        from ikatkit.models import resolve_model

        self.model = SentenceTransformer(resolve_model(model), device="cpu")
        self.vectors: dict[str, np.ndarray] = {}

    def rank(self, query: str, candidates: dict[str, str]) -> list[tuple[str, float]]:
        for text in dict.fromkeys([query, *candidates.values()]):
            if text not in self.vectors:
                self.vectors[text] = self.model.encode([text], batch_size=1, normalize_embeddings=True,
                                                       convert_to_numpy=True, show_progress_bar=False)[0]
        q = np.stack([self.vectors[query]] * len(candidates))
        scores = np.einsum("ij,ij->i", q, np.stack([self.vectors[t] for t in candidates.values()]))
        return sorted(zip(candidates, map(float, scores)), key=lambda item: (-item[1], item[0]))


def cli(*args: str) -> tuple[float, float]:
    """Wall and CPU seconds ``ikatkit ARGS`` took in a new process (its output is shown only when it fails)."""
    start, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "ikatkit.cli", *args], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"ikatkit {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (round(time.perf_counter() - start, 1),
            round(after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, 1))


def timed_cpu(function):  # noqa: ANN001, ANN201
    """(wall seconds, CPU seconds of this process, result): on a busy machine the CPU seconds tell more."""
    cpu = time.process_time()
    wall, result = timed(function)
    return round(wall, 2), round(time.process_time() - cpu, 2), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/ikat/2023")
    parser.add_argument("--anchor-turns", type=int, default=2, help="turns the anchor re-ranks (it is slow)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ikatkit.pipelines.record import TurnRecord
    from ikatkit.stages.core import candidate_key
    from ikatkit.rank import make_ranker

    results: dict[str, object] = {"load_average": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        passages, texts = provenance_jsonl(args.data, work / "passages.jsonl"), provenance_texts(args.data)
        cli("index", "build", str(passages), "--out", str(work / "index"), "--threads", "2")
        run = ["run", str(CONFIG), "--topics", str(args.data / "test_topics.json"),
               "--index", str(work / "index"), "--cache", str(work / "cache")]
        cold = cli(*run, "--out", str(work / "cold"))
        warm = cli(*run, "--out", str(work / "warm"))
        results.update(cli_cold_run_wall_cpu_s=cold, cli_warm_rerun_wall_cpu_s=warm)
        results["warm_rerun_byte_identical"] = all(
            (work / "cold" / name).read_bytes() == (work / "warm" / name).read_bytes()
            for name in ("manual-biencoder.json", "manual-biencoder.trec", "validation.txt"))
        manifest = json.loads((work / "cold" / "manifest.json").read_text())
        results["cold_run_rerank_stage_s"] = manifest["seconds_per_stage"]["rerank"]
        results["cold_run_encoded_texts"] = manifest["resource_stats"]["minilm"]["encoded"]

        records = [TurnRecord.from_json(r) for path in sorted((work / "cold" / "checkpoints").glob("batch-*.json"),
                                                               key=lambda p: int(p.stem.split("-")[-1]))
                   for r in json.loads(path.read_text())["records"]]
        subset = [(r.query, {pid: texts[pid] for pid, _ in r.candidates[candidate_key("bm25", r.query)]},
                   r.ranking)
                  for r in records[:args.anchor_turns]]
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the anchor on one thread too: how much of the ratio is batching alone
        one = OneAtATime("bundled:minilm")
        anchor_1 = timed_cpu(lambda: [one.rank(q, c) for q, c, _ in subset])
        torch.set_num_threads(threads)
        anchor = OneAtATime("bundled:minilm")
        anchor_s, anchor_cpu, expected = timed_cpu(lambda: [anchor.rank(q, c) for q, c, _ in subset])
        fresh = make_ranker("bi-encoder", "bundled:minilm", cache_dir=work / "subset-cache")
        ours_s, ours_cpu, got = timed_cpu(lambda: [fresh.rank(q, c) for q, c, _ in subset])
        two = make_ranker("bi-encoder", "bundled:minilm", cache_dir=work / "subset-cache-2", threads=2)
        two_s, two_cpu, got_2 = timed_cpu(lambda: [two.rank(q, c) for q, c, _ in subset])
        openvino = {}
        for n in (1, 2):
            ranker = make_ranker("bi-encoder", "bundled:minilm", cache_dir=work / f"subset-cache-ov{n}", threads=n,
                                 backend="openvino")
            wall, cpu, found = timed_cpu(lambda ranker=ranker: [ranker.rank(q, c) for q, c, _ in subset])
            openvino[n] = found
            results[f"openvino_{n}_thread_wall_cpu_s"] = (wall, cpu)
            results[f"ratio_openvino_{n}_thread"] = round(anchor_s / wall, 2)
        results.update(
            openvino_turns_with_other_rankings=[sum([p for p, _ in a] != [p for p, _ in b] for a, b
                                                    in zip(found, expected)) for found in openvino.values()],
            openvino_max_score_difference_same_rank=max(abs(a - b) for found in openvino.values() for ours, theirs
                                                        in zip(found, expected)
                                                        for (_, a), (_, b) in zip(ours, theirs)))
        results.update(anchor_turns=len(subset), anchor_distinct_texts=len(anchor.vectors), anchor_threads=threads,
                       anchor_wall_cpu_s=(anchor_s, anchor_cpu), anchor_1_thread_wall_cpu_s=anchor_1[:2],
                       ikatkit_wall_cpu_s=(ours_s, ours_cpu), ratio=round(anchor_s / ours_s, 2),
                       ratio_cpu=round(anchor_cpu / ours_cpu, 2),
                       ratio_vs_anchor_1_thread=round(anchor_1[0] / ours_s, 2),
                       ikatkit_2_threads_wall_cpu_s=(two_s, two_cpu), ratio_2_threads=round(anchor_s / two_s, 2),
                       same_score_bits_2_threads_as_anchor=got_2 == expected,
                       same_rankings=[[p for p, _ in r] for r in got] == [[p for p, _ in r] for r in expected],
                       same_score_bits_as_anchor_1_thread=got == anchor_1[2],
                       anchor_same_bits_on_1_and_2_threads=expected == anchor_1[2],
                       equals_pipeline_run=got == [[(p, s) for p, s in ranking] for _, _, ranking in subset])
        results["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
