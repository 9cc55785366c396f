"""M-RAG's Figure 1 on iKAT 2023: BM25 from the whole index vs the oracle-best partition vs Agent-S's choice
(and the best-centroid baseline), per partitioning strategy and M in {2, 4, 8}, over the 894 real passages.

Agent-S is trained on the 2023 train topics (their response_provenance passages as relevant, grade 2) plus the
judged turns of the test conversations outside the evaluated fold (5 folds of the 25 test conversations, by
subject: 9-1 and 9-2 share one; the 13 subjects round robin): it is never evaluated on a conversation, nor a
subject, it was trained on. Measures over the
176 judged test turns against NIST's qrels: nDCG@3 and R(rel=2)@10.

    PYTHONPATH=src python bench/partitions_figure.py --work /tmp/mrag --out /tmp/mrag/partitions_figure.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from common import provenance_jsonl

STREAM = r"^clueweb22-(en\d+)"
STRATEGIES = ("random", "cluster", "graph", "category")
SIZES = (2, 4, 8)
FOLDS = 5
MEASURES = ("nDCG@3", "R(rel=2)@10")


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ikat", default=str(Path(__file__).resolve().parents[2] / "shared" / "ikat" / "2023"))
    parser.add_argument("--work", required=True, help="folder for the indexes (reused when run again)")
    parser.add_argument("--out", required=True, help="JSON of the figures")
    parser.add_argument("--png", help="the figure as an image")
    parser.add_argument("--queries", nargs="+", default=["raw", "manual"])
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES), help="values of M")
    parser.add_argument("--episodes", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import ir_measures

    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.index.build import build_index
    from ikatkit.partition.build import embeddings_cache, partition_index
    from ikatkit.retrieve.partitioned import PartitionedSearcher
    from ikatkit.partition.selector import (Policy, feature_names, judged_turns, partition_rankings, rewards_of,
                                            states, train_dqn)
    from ikatkit.index.job import read_source
    from ikatkit.rank import make_ranker
    from ikatkit.topics import load_topics

    ikat, work = Path(args.ikat), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    passages = work / "passages.jsonl"
    if not passages.exists():
        provenance_jsonl(ikat, passages)
    whole_index = work / "whole"
    build_index([passages], whole_index, threads=1)
    partition_index(whole_index, work / "random-2", "random", 2, seed=args.seed, threads=1)  # embeds the passages
    encoder = make_ranker("bi-encoder", "bundled:minilm", batch_size=64)
    source, records = read_source([whole_index])
    known = dict(zip((r["contents"] for r in records), np.load(embeddings_cache(source, "bundled:minilm"))))

    def encode(texts: list[str]) -> np.ndarray:  # passages from the partitioning's embeddings, queries by MiniLM
        new = list(dict.fromkeys(t for t in texts if t not in known))
        if new:
            known.update(zip(new, encoder.encode(new)))
        return np.stack([known[t] for t in texts])

    train, test = load_topics(ikat / "train_topics.json"), load_topics(ikat / "test_topics.json")
    qrels = load_qrels(ikat / "qrels.txt")
    test_judged = judged_turns(test, qrels, provenance=False)
    learn = {**judged_turns(train, None, provenance=True), **test_judged}
    evaluated = [q for q in test.qids if q in qrels]
    subjects = sorted({c.id.split("-")[0] for c in test.conversations}, key=int)  # 9-1, 9-2: one subject
    fold_of = {c.id: subjects.index(c.id.split("-")[0]) % FOLDS for c in test.conversations}
    parsed = [ir_measures.parse_measure(name) for name in MEASURES]

    def measure(ranking: dict[str, list]) -> dict[str, float]:
        run = {q: {pid: float(s) for pid, s in ranking[q]} for q in evaluated if ranking.get(q)}
        total = dict.fromkeys(MEASURES, 0.0)
        for metric in ir_measures.iter_calc(parsed, {q: qrels[q] for q in evaluated}, run):
            total[str(metric.measure)] += metric.value
        return {name: round(value / len(evaluated), 4) for name, value in total.items()}  # unanswered turns: 0

    results: dict[str, object] = {"evaluated_turns": len(evaluated), "fold_of_conversation": fold_of,
                                  "train_turns": len(learn) - len(test_judged),
                                  "test_turns_learned_from": len(test_judged), "folds": FOLDS,
                                  "episodes": args.episodes, "seed": args.seed, "rows": []}
    wholes: dict[str, dict[str, float]] = {}
    for strategy, m, kind in itertools.product(args.strategies, args.sizes, args.queries):  # figures as soon as built
        queries = {**train.queries(kind), **test.queries(kind)}
        options = {"field": "id", "pattern": STREAM} if strategy == "category" else {}
        folder = work / f"{strategy}-{m}"
        partition_index(whole_index, folder, strategy, m, seed=args.seed, threads=1, **options)
        started = time.time()
        searcher = PartitionedSearcher(folder)
        if kind not in wholes:
            wholes[kind] = measure(searcher.batch_search({q: queries[q] for q in evaluated}, 100))
        whole = wholes[kind]
        judged_qids = [q for q in queries if q in learn]
        rankings = partition_rankings(searcher, {q: queries[q] for q in judged_qids}, 100)
        centres = None if searcher.manifest["centroids"] is None else np.asarray(searcher.manifest["centroids"],
                                                                                  dtype=np.float32)
        state = states({q: queries[q] for q in judged_qids}, rankings, encode, searcher.texts, centres)
        rewards = rewards_of(rankings, learn, judged_qids)
        row_of = {q: i for i, q in enumerate(judged_qids)}
        choice: dict[str, dict[str, int]] = {"oracle": {}, "agent": {}, "centroid": {}}
        for q in evaluated:
            choice["oracle"][q] = int(np.argmax(rewards[row_of[q]])) if q in row_of else 0
        for fold in range(FOLDS):
            held = [q for q in evaluated if fold_of[test.conversation_of(q).id] == fold]
            fit = [q for q in judged_qids if q not in test.qids or fold_of[test.conversation_of(q).id] != fold]
            weights = train_dqn(np.stack([state[q] for q in fit]), rewards[[row_of[q] for q in fit]],
                                args.seed, args.episodes)
            policy = Policy(weights, m, feature_names(centres is not None), searcher.manifest["fingerprint"])
            for q in held:
                choice["agent"][q] = policy.choose(state[q]) if q in state else 0
        if centres is not None:
            vectors = encode([queries[q] for q in evaluated])
            choice["centroid"] = {q: int(np.argmax(centres @ v)) for q, v in zip(evaluated, vectors)}
        row = {"queries": kind, "strategy": strategy, "partitions": m, "whole": whole,
               "sizes": [p["passages"] for p in searcher.manifest["parts"]]}
        full = partition_rankings(searcher, {q: queries[q] for q in evaluated}, 100)
        for name, chosen in choice.items():
            if chosen:
                row[name] = measure({q: full[chosen[q]][q] for q in evaluated})
                row[f"{name}_choices"] = np.bincount(list(chosen.values()), minlength=m).tolist()
        results["rows"].append(row)
        print(json.dumps(row), f"({time.time() - started:.1f} s)", flush=True)
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    if args.png:
        _plot(results, args.png)
    return 0


def _plot(results: dict, path: str) -> None:  # type: ignore[type-arg]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({r["queries"] for r in results["rows"]})
    fig, axes = plt.subplots(len(kinds) * 2, len(STRATEGIES), figsize=(14, 5.5 * len(kinds)), squeeze=False)
    for k, kind in enumerate(kinds):
        for s, strategy in enumerate(STRATEGIES):
            rows = [r for r in results["rows"] if r["queries"] == kind and r["strategy"] == strategy]
            if not rows:
                continue
            for j, name in enumerate(MEASURES):
                ax = axes[2 * k + j][s]
                sizes = [1] + [r["partitions"] for r in rows]
                for method, style in (("oracle", "o-"), ("agent", "s-"), ("centroid", "^--")):
                    if all(method in r for r in rows):
                        ax.plot(sizes, [rows[0]["whole"][name]] + [r[method][name] for r in rows], style,
                                label=method)
                ax.axhline(rows[0]["whole"][name], color="grey", lw=1, label="whole")
                ax.set_xticks(sizes)
                ax.set_title(f"{strategy} ({kind} utterances)", fontsize=9)
                ax.set_ylabel(name)
                ax.set_xlabel("#partitions")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    sys.exit(main())
