"""Response evaluation of a whole iKAT 2023 test year (332 turns) with ROUGE-1/2/L, K-Precision and MiniLM
BERTScore, against the naive per-item loop of the reference packages (one RougeScorer / BERTScorer call per turn,
models loaded once) in the same run; the values must agree to 1e-4 (BERTScore moves by ~1e-5 with batch padding).
The response of each turn is its top provenance passage (``respond task = "extractive"``); turns without
provenance have an empty response.

With ``--figures`` it also prints the README table: (a) the canonical response against itself and its own
provenance, (b) the top provenance passage as the response; all measures.

    PYTHONPATH=src python bench/bench_responses.py [--data ../shared/ikat/2023] [--figures]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import timed  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
MEASURES = ["ROUGE-1", "ROUGE-2", "ROUGE-L", "ROUGE-L-R", "K-Precision", "BERTScore-R", "BERTScore-F1"]
FIGURES = ["ROUGE-L", "ROUGE-L-R", "Recall", "BERTScore-R", "BERTScore-F1", "EmbedSim", "K-Precision",
           "BERTScore-KP", "CitationCoverage", "Words", "Empty"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared/ikat/2023"))
    parser.add_argument("--figures", action="store_true", help="also print the (a)/(b) table of the README")
    args = parser.parse_args()
    from ikatkit.evaluate.responses import k_precision
    from ikatkit.evaluate.responses.data import ResponseRun
    from ikatkit.evaluate.responses.evaluate import ResponseScorers, evaluate_response_runs
    from ikatkit.collection.readers import passage_texts
    from ikatkit.topics import load_topics

    data = Path(args.data)
    topics = load_topics(data / "test_topics.json")
    texts = passage_texts([data / "test_provenance_passages.jsonl"])
    lookup = lambda ids: {p: texts[p] for p in ids if p in texts}  # noqa: E731
    top = {t.qid: [p for p in t.response_provenance if p in texts][:1] for t in topics}
    # as the respond stage does it: the top passage, cut to the track's 250 words
    extractive = ResponseRun("extractive", {q: " ".join(texts[ids[0]].split()[:250]) if ids else ""
                                            for q, ids in top.items()}, top)
    canonical = ResponseRun("canonical", {t.qid: t.response or "" for t in topics},
                            {t.qid: list(t.response_provenance) for t in topics})
    scorers = ResponseScorers()
    load_seconds, _ = timed(lambda: scorers.bert)
    print(f"{len(topics)} turns; BERTScore model {scorers.bert.label} loaded in {load_seconds:.1f} s (not timed)")

    ours_seconds, results = timed(lambda: evaluate_response_runs([extractive], topics=topics, passages=lookup,
                                                                 measures=MEASURES, scorers=scorers))
    result = results["extractive"]

    def naive() -> dict[str, dict[str, float]]:
        from rouge_score import rouge_scorer

        scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
        values = {}
        for t in topics:
            response, reference = extractive.responses[t.qid], t.response or ""
            rouge = scorer.score(reference, response)
            row = {"ROUGE-1": rouge["rouge1"].fmeasure, "ROUGE-2": rouge["rouge2"].fmeasure,
                   "ROUGE-L": rouge["rougeL"].fmeasure, "ROUGE-L-R": rouge["rougeL"].recall}
            if response.strip() and reference.strip():
                p, r, f = scorers.bert.scorer.score([response], [reference])
                row.update({"BERTScore-R": float(r[0]), "BERTScore-F1": float(f[0])})
            else:
                row.update({"BERTScore-R": 0.0, "BERTScore-F1": 0.0})
            if extractive.used[t.qid]:
                row["K-Precision"] = k_precision([response], [[texts[p] for p in extractive.used[t.qid]]])[0]
            values[t.qid] = row
        return values

    anchor_seconds, anchor = timed(naive)
    worst = 0.0
    for qid, row in anchor.items():
        for name, value in row.items():
            label = next(m for m in result.mean if m.split("[")[0] == name)
            worst = max(worst, abs(result.per_query[qid][label] - value))
    print(f"ours: {ours_seconds:.2f} s for {len(result.evaluated)} turns; naive per-item loop: {anchor_seconds:.2f} s; "
          f"speed-up {anchor_seconds / ours_seconds:.2f}x; largest difference {worst:.1e}")
    # BERTScore of a pair moves by ~1e-5 with the padding of its batch (measured: 3.5e-5 at most on this year)
    assert worst < 1e-4, f"values differ from the packages' by {worst}"
    print(json.dumps({m: round(v, 4) for m, v in result.mean.items()}))
    if args.figures:
        figures = evaluate_response_runs([canonical, extractive], topics=topics, passages=lookup, measures=FIGURES,
                                         scorers=scorers)
        labels = list(figures["canonical"].mean)
        print("| response | turns | " + " | ".join(labels) + " |")
        print("|---" * (len(labels) + 2) + "|")
        for name, r in figures.items():
            print(f"| {name} | {len(r.evaluated)} | " + " | ".join(f"{r.mean[m]:.4f}" for m in labels) + " |")


if __name__ == "__main__":
    main()
