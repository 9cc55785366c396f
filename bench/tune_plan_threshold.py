"""Source planning on iKAT 2023: tune the threshold planner on TRAIN, report every planner on TEST.

Gold "needs PTKB" = a non-empty ``ptkb_provenance`` (checked against NIST's PTKB qrels); gold "needs passages" =
a non-empty ``response_provenance``. The features are what ``plan_sources`` reads in ``configs/rtg_unims.toml``:
the PTKB ranker's best score (MiniLM, all statements, no history) and the top score of the passage ranking (BM25
top 100 over the 894 provenance passages, re-ranked by MiniLM), computed by the pipeline's own stages on the
raw utterances (the automatic setting; ``--queries manual``: resolved utterances). Thresholds: the midpoints
between consecutive distinct train scores, the one with the best train F1 (ties: the higher threshold).
Then precision / recall / F1 of ``always``, ``threshold`` (and ``llm`` with ``--llm``) on test, and the PTKB
ranking measures on NIST's qrels when each plan empties the PTKB list of the turns it judges PTKB-free.

    python bench/tune_plan_threshold.py [--data ../shared/ikat/2023] [--queries raw] [--llm] [--cache DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import provenance_jsonl


def prf(predicted: list[bool], gold: list[bool]) -> dict[str, float]:
    """Precision, recall and F1 of the positive class (0 where undefined), and accuracy."""
    tp = sum(p and g for p, g in zip(predicted, gold))
    precision = tp / sum(predicted) if any(predicted) else 0.0
    recall = tp / sum(gold) if any(gold) else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = sum(p == g for p, g in zip(predicted, gold)) / len(gold)
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "accuracy": round(accuracy, 4), "predicted_positive": sum(predicted), "gold_positive": sum(gold)}


def best_threshold(scores: list[float], gold: list[bool]) -> tuple[float, float]:
    """The threshold (midpoint between distinct scores, or below all) with the best F1, ties to the higher one."""
    values = sorted(set(scores))
    candidates = [values[0] - 1e-6] + [round((a + b) / 2, 6) for a, b in zip(values, values[1:])]
    scored = [(prf([s >= t for s in scores], gold)["f1"], t) for t in candidates]
    f1, threshold = max(scored)
    return threshold, f1


def ranked_records(topics: Any, index: Path, ranker: Any, queries: str) -> list[Any]:
    """Records through the pipeline's stages: query, all PTKB statements ranked, BM25 top 100, MiniLM re-ranking."""
    from ikatkit.pipelines.pipeline import Pipeline
    from ikatkit.pipelines.record import records_for
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.stages.core import ManualQuery, RankPtkb, RawQuery, Rerank, Retrieve

    searcher = Bm25Searcher(index)
    return Pipeline([ManualQuery() if queries == "manual" else RawQuery(), RankPtkb(ranker, k=100),
                     Retrieve(searcher, k=100, expand_ptkb=False), Rerank(ranker, searcher.texts)])(records_for(topics))


def planned(records: list[Any], stage: Any) -> list[Any]:
    """Copies of the records planned by ``stage`` (the records themselves stay as they are)."""
    from ikatkit.pipelines.pipeline import Pipeline
    from ikatkit.pipelines.record import TurnRecord

    return Pipeline([stage])([TurnRecord.from_json(json.loads(json.dumps(r.to_json()))) for r in records])


def ptkb_measures(records: list[Any], qrels: Any) -> dict[str, Any]:
    """nDCG@5 / P@5 of the planned PTKB lists on NIST's qrels: an emptied judged turn scores 0 (``zero``) or is
    left out (``skip``)."""
    from ikatkit.evaluate.ptkb import evaluate_ptkb

    rankings = {r.qid: dict((k, s) for k, s in r.ptkb) for r in records}
    out: dict[str, Any] = {"judged_turns_emptied": sum(not rankings.get(q) for q in qrels)}
    for missing in ("zero", "skip"):
        result = evaluate_ptkb(rankings, qrels, ["nDCG@5", "P@5"], missing=missing)
        out[missing] = {m: round(v, 4) for m, v in result.mean.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/ikat/2023")
    parser.add_argument("--queries", choices=("raw", "manual"), default="raw")
    parser.add_argument("--index", type=Path, help="a Lucene index of the 894 provenance passages (else built)")
    parser.add_argument("--llm", action="store_true", help="also the llm planner with the bundled SmolLM2 (slow)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ikatkit-plan-cache")
    parser.add_argument("--test-conversations", nargs="*", help="only these test conversations (llm: to fit time)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.stages.plan import PlanSources
    from ikatkit.rank import make_ranker
    from ikatkit.topics import load_topics

    train, test = load_topics(args.data / "train_topics.json"), load_topics(args.data / "test_topics.json")
    if args.test_conversations:
        test = test.subset(args.test_conversations)
    nist = {q: judged for q, judged in load_qrels(args.data / "ptkb_qrels.nist.txt").items() if q in test.qids}
    index = args.index or build_provenance_index(args.data, args.cache / "index894")
    ranker = make_ranker("bi-encoder", "bundled:minilm", cache_dir=str(args.cache / "embeddings"))
    report: dict[str, Any] = {"queries": args.queries}
    nist_relevant = {q for q, judged in nist.items() if any(v > 0 for v in judged.values())}
    cited = {t.qid for t in test if t.ptkb_provenance}
    report["gold_agreement"] = {"test_turns_citing_ptkb": len(cited), "nist_turns_with_a_relevant_statement":
                                len(nist_relevant), "both": len(cited & nist_relevant),
                                "nist_judged_turns": len(nist)}
    features = {}
    for name, topics in (("train", train), ("test", test)):
        records = ranked_records(topics, index, ranker, args.queries)
        features[name] = (records, [r.ptkb[0][1] for r in records], [r.ranking[0][1] if r.ranking else -1.0
                                                                    for r in records],
                          [bool(r.gold_ptkb) for r in records], [bool(r.provenance) for r in records])
    _, ptkb_train, passage_train, gold_ptkb_train, gold_passages_train = features["train"]
    ptkb_threshold, train_f1 = best_threshold(ptkb_train, gold_ptkb_train)
    passage_threshold, passage_f1 = best_threshold(passage_train, gold_passages_train)
    report["tuned_on_train"] = {"turns": len(ptkb_train), "ptkb_threshold": ptkb_threshold, "ptkb_f1": train_f1,
                                "passage_threshold": passage_threshold, "passage_f1": passage_f1,
                                "always_ptkb_f1": prf([True] * len(gold_ptkb_train), gold_ptkb_train)["f1"]}
    planners = {"always": PlanSources("always"),
                "threshold": PlanSources("threshold", ptkb_threshold=ptkb_threshold,
                                         passage_threshold=passage_threshold)}
    if args.llm:
        from ikatkit.llm import make_llm

        llm = make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 16,
                        "cache_dir": str(args.cache / "llm")})
        planners["llm"] = PlanSources("llm", llm=llm)
    for split in ("train", "test"):
        records, *_, gold_ptkb, gold_passages = features[split]
        report[split] = {}
        for name, stage in planners.items():
            if split == "train" and name == "llm":
                continue
            done = planned(records, stage)
            entry = {"ptkb": prf(["ptkb" in r.sources for r in done], gold_ptkb),
                     "passages": prf(["passages" in r.sources for r in done], gold_passages),
                     "decisions": {d: sum(r.plan["decision"] == d for r in done)
                                   for d in sorted({r.plan["decision"] for r in done})},
                     "fallbacks": sum(r.plan["fallback"] for r in done)}
            if split == "test":
                entry["ptkb_ranking_nist"] = ptkb_measures(done, nist)
                entry["nist_positive_turns_planned_with_ptkb"] = sum(
                    "ptkb" in r.sources for r in done if r.qid in nist_relevant)
            report[split][name] = entry
    print(json.dumps(report, indent=2))


def build_provenance_index(data: Path, out: Path) -> Path:
    """The 894 provenance passages (first text per id) indexed as tests/conftest.py does."""
    from ikatkit.index.build import build_index

    if not (out / "manifest.json").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        jsonl = provenance_jsonl(data, out.parent / "passages894.jsonl")
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the report
            build_index([jsonl], out, threads=2)
    return out


if __name__ == "__main__":
    main()
