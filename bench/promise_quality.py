"""Quality of ProMiSe refinement in a finished run: the plain RtG response (the respond stage's), the initial
best-of-N response and the final refined one, each scored with the seed paper's measures — ROUGE-L F1 and token
Recall against the canonical response, BERTScore recall (MiniLM-L6, layer 6), K-Precision and BERTScore
K-Precision against the used passages — with paired t-tests (final vs initial, initial vs plain, final vs plain)
and the refinement counts. Reads the run's checkpoints; the canonical responses come from the topics.

    python bench/promise_quality.py RUN_DIR --topics test_topics.json [--json out.json]
    python bench/promise_quality.py TRAIN_RUN_DIR --thresholds   # medians of the initial responses' proxy scores

``--thresholds`` reads a run on the train topics (``iterations = 0`` is enough) and prints, per proxy metric, the
median score of the initial best-of-N responses: thresholds at which each metric alone sends about half the turns
to refinement (the seed paper's appendix B frames thresholds as control of the refinement rate).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ikatkit.evaluate.responses import BertScore, k_precision, rouge, token_recall
from ikatkit.evaluate.significance import paired_test
from ikatkit.pipelines.record import TurnRecord
from ikatkit.topics import load_topics

SYSTEMS = ("plain", "initial", "final")
PAIRS = (("initial", "final"), ("plain", "initial"), ("plain", "final"))


def records(run_dir: Path) -> list[TurnRecord]:
    out = []
    for path in sorted((run_dir / "checkpoints").glob("batch-*.json")):
        out.extend(TurnRecord.from_json(r) for r in json.loads(path.read_text(encoding="utf-8"))["records"])
    return out


def texts(record: TurnRecord) -> dict[str, str]:
    t = record.refinement
    initial = t["candidates"][t["initial"]]["text"] if t["initial"] is not None else t["plain"]
    return {"plain": t["plain"], "initial": initial, "final": record.response}


def measure(run_dir: Path, topics_path: Path) -> dict[str, Any]:
    topics = load_topics(topics_path)
    canonical = {turn.qid: turn.response or "" for turn in topics}
    recs = [r for r in records(run_dir) if r.refinement]
    references = [canonical[r.qid] for r in recs]
    passages = [[r.passage_texts.get(pid, "") for pid in r.used] for r in recs]
    bert = BertScore()
    values: dict[str, dict[str, list[float]]] = {}
    for system in SYSTEMS:
        responses = [texts(r)[system] for r in recs]
        values[system] = {"ROUGE-L": rouge(responses, references, types=("rougeL",))["rougeL_f"],
                          "Recall": token_recall(responses, references),
                          "BERT-Recall": bert.score(responses, references)["recall"],
                          "K-Precision": k_precision(responses, passages),
                          "BERT-K-Precision": bert.k_precision(responses, passages)}
    measures = list(values["final"])
    traces = [r.refinement for r in recs]
    return {
        "run": str(run_dir), "turns": len(recs), "bertscore_model": bert.label,
        "means": {s: {m: round(100 * sum(v) / len(v), 2) for m, v in values[s].items()} for s in SYSTEMS},
        "ttest_p": {f"{b} vs {a}": {m: round(paired_test(values[a][m], values[b][m], "ttest"), 4) for m in measures}
                    for a, b in PAIRS},
        "share_refined": round(sum(t["iterations"] > 0 for t in traces) / len(traces), 4),
        "mean_iterations": round(sum(t["iterations"] for t in traces) / len(traces), 3),
        "llm_calls_per_turn": round(sum(t["llm_calls"] for t in traces) / len(traces), 3),
        "final_differs_from_initial": sum(t["best"] != t["initial"] for t in traces),
        "empty_outputs": sum(t["empty_outputs"] for t in traces),
    }


def thresholds(run_dir: Path) -> dict[str, float]:
    """Per proxy metric, the median of the initial responses' scores over the run's turns."""
    import statistics

    scores = [r.refinement["candidates"][r.refinement["initial"]]["scores"] for r in records(run_dir)
              if r.refinement and r.refinement["initial"] is not None]
    return {m: round(statistics.median(s[m] for s in scores), 4) for m in scores[0]} if scores else {}


def table(result: dict[str, Any]) -> str:
    measures = list(result["means"]["final"])
    lines = ["| response | " + " | ".join(measures) + " |", "|---" * (len(measures) + 1) + "|"]
    for system in SYSTEMS:
        lines.append(f"| {system} | " + " | ".join(f"{result['means'][system][m]:.2f}" for m in measures) + " |")
    for pair, ps in result["ttest_p"].items():
        lines.append(f"| p ({pair}) | " + " | ".join(f"{ps[m]:.3f}" for m in measures) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--topics", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--thresholds", action="store_true", help="print the median initial proxy scores")
    args = parser.parse_args()
    if args.thresholds:
        print(json.dumps({"turns": len(records(args.run_dir)), "median_initial_scores": thresholds(args.run_dir)}))
        return
    if args.topics is None:
        parser.error("--topics is required to score against the canonical responses")
    result = measure(args.run_dir, args.topics)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(table(result))
    print({k: v for k, v in result.items() if k not in ("means", "ttest_p")})


if __name__ == "__main__":
    main()
