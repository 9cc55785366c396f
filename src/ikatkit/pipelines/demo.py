"""The demo: index the embedded collection, run a pipeline over the demo topics, validate and evaluate."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from ikatkit.atomic import write_json


def demo_data() -> Path:
    """The folder of the embedded demo collection, topics and judgements (written by us)."""
    return Path(str(files("ikatkit") / "data" / "demo"))


def run_demo(config: str | Path, out: str | Path) -> int:
    """Build (or reuse) the demo index, run ``config`` on the demo topics, print and save the evaluation."""
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.ptkb import evaluate_ptkb
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.index.build import build_index
    from ikatkit.pipelines.runner import run_pipeline

    data, out = demo_data(), Path(out)
    index = out / "index"
    manifest = build_index([data / "clueweb22"], index, fmt="clueweb22")
    print(f"index {index}: {manifest['counts']['passages']} passages from {manifest['counts']['documents']} documents")
    outcome = run_pipeline(config, data / "topics.json", out / "run", index=index, cache_dir=out / "cache")
    print(outcome.summary())
    passages = evaluate(outcome.run, load_qrels(data / "qrels.txt"))
    ptkb = evaluate_ptkb(outcome.run, load_qrels(data / "ptkb_qrels.txt"))
    write_json(out / "evaluation.json", {"passages": passages.mean, "ptkb": ptkb.mean,
                                         "per_query": passages.per_query})
    print("passage ranking: " + ", ".join(f"{m} {v:.4f}" for m, v in passages.mean.items()))
    print("PTKB ranking:    " + ", ".join(f"{m} {v:.4f}" for m, v in ptkb.mean.items()))
    print(f"evaluation: {out / 'evaluation.json'}")
    return 0 if outcome.valid else 1
