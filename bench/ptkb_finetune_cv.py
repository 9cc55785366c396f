"""Cross-validation on the 2023 TRAIN topics only: MiniLM fine-tuned on the PTKB labels (bi- or cross-encoder, with
or without the conversation's earlier utterances, after 1-4 epochs), its score alone or beside the conversation
features of ikatkit.rank.ptkb_model (``--features responses``: beside the responses features, cross-validated
nested as in bench/ptkb_model_table.py), against the logistic models of the last round.

5-fold cross-validation grouped by conversation (the folds of ``ptkb_model.cv_folds``): each fold's model is
fine-tuned on the other folds' conversations and scores the held-out ones. Figures: out-of-fold mean per-turn
SetF at the out-of-fold threshold (best mean per-turn F1) and out-of-fold nDCG@5, raw and resolved utterances; the
rule, set before any test figure: the best mean of the four. "+ features": a logistic model over the conversation
features and the out-of-fold fine-tuned score, cross-validated on the same folds (its training rows' scores come
from the other folds' fine-tuned models, which saw the held-out fold's labels: a mild leak, stated).

    python bench/ptkb_finetune_cv.py [--data ../shared/ikat] [--variants bi,bi+context,cross,cross+context]
        [--kinds raw,manual] [--features conversation|responses]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

EPOCHS = 4

sys.path.insert(0, str(Path(__file__).parent))
from ptkb_model_table import RANKED_GRID, nested_out_of_fold  # noqa: E402


def figures(scores, data) -> tuple[float, float]:  # noqa: ANN001
    """Out-of-fold mean per-turn SetF (at the best out-of-fold threshold) and nDCG@5 of row scores."""
    from ikatkit.evaluate.ptkb import evaluate_ptkb
    from ikatkit.rank import ptkb_model as pm

    setf = pm.mean_turn_f1(scores, data.truth, data.qids, pm.best_threshold(scores, data.truth, data.qids))
    ranks: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for i, qid in enumerate(data.qids):
        ranks.setdefault(qid, {})[str(i)] = float(scores[i])
        qrels.setdefault(qid, {})[str(i)] = int(data.truth[i])
    return setf, evaluate_ptkb(ranks, qrels).mean["nDCG@5"]


def stacked(data, extra, tables=None):  # noqa: ANN001, ANN201
    """Out-of-fold probabilities of a logistic model over the conversation features and the column ``extra``;
    with ``tables`` (the training data per ranked_* setting) over the responses features, nested."""
    import numpy as np

    from ikatkit.rank import ptkb_model as pm

    if tables is not None:
        return nested_out_of_fold(tables, pm.FEATURE_SETS["responses"], 5, extra)[0]
    columns = [pm.ALL_FEATURES.index(n) for n in pm.FEATURE_SETS["conversation"]]
    table = np.column_stack([data.table[:, columns], extra])
    probabilities = np.zeros(len(data.truth))
    for train, held_out in pm.cv_folds(data, 5):
        scaler, fitted = pm._fit(table[train], data.truth[train], list(range(table.shape[1])), 1.0)
        probabilities[held_out] = fitted.predict_proba(scaler.transform(table[held_out]))[:, 1]
    return probabilities


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/ikat")
    parser.add_argument("--variants", default="bi,bi+context,cross,cross+context")
    parser.add_argument("--kinds", default="raw,manual")
    parser.add_argument("--features", choices=("conversation", "responses"), default="conversation",
                        help="the features beside the fine-tuned score (default %(default)s)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np

    from ikatkit.rank import make_ranker
    from ikatkit.rank import ptkb_model as pm
    from ikatkit.rank.ptkb_finetune import FineTuned, turn_text
    from ikatkit.topics import load_topics

    train = load_topics(args.data / "2023/train_topics.json")
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as cache:
        ranker = make_ranker("bi-encoder", "bundled:minilm", cache_dir=cache)
        for kind in args.kinds.split(","):
            data = pm.training_data(train, train.queries(kind), ranker)
            turns = pm.topic_turns(train, train.queries(kind))
            for name in ("turn", "conversation"):
                results.setdefault(f"logistic {name}", []).extend(
                    figures(pm.out_of_fold(data, pm.FEATURE_SETS[name], 5), data))
            tables = None
            if args.features == "responses":
                tables = {g: pm.training_data(train, train.queries(kind), ranker, ranked=g) for g in RANKED_GRID}
                results.setdefault("logistic responses (nested)", []).extend(
                    figures(nested_out_of_fold(tables, pm.FEATURE_SETS["responses"])[0], data))
            for variant in args.variants.split(","):
                architecture, context = variant.split("+")[0], variant.endswith("+context")
                pairs = []
                for qid in dict.fromkeys(data.qids):
                    turn = turns[qid]
                    text = turn_text(turn.query, [u for u, _ in turn.history], context)
                    pairs += [(text, statement) for statement in turn.ptkb.values()]
                oof = np.zeros((EPOCHS, len(pairs)))
                started = time.perf_counter()
                for train_rows, held_out in pm.cv_folds(data, 5):
                    def keep(epoch: int, scorer: FineTuned, held_out=held_out) -> None:  # noqa: ANN001
                        oof[epoch - 1, held_out] = scorer.score([pairs[i] for i in held_out])

                    FineTuned.train(architecture, "bundled:minilm", [pairs[i] for i in train_rows],
                                    data.truth[train_rows].tolist(), EPOCHS, after_epoch=keep)
                print(f"{kind} {variant}: {time.perf_counter() - started:.0f} s", flush=True)
                for epoch in range(EPOCHS):
                    alone = figures(oof[epoch], data)
                    both = figures(stacked(data, oof[epoch], tables), data)
                    results.setdefault(f"{variant}, {epoch + 1} ep", []).extend(alone)
                    results.setdefault(f"{variant}, {epoch + 1} ep + features", []).extend(both)
                    print(f"  {epoch + 1} ep: alone SetF {alone[0]:.4f} nDCG@5 {alone[1]:.4f}; + features SetF "
                          f"{both[0]:.4f} nDCG@5 {both[1]:.4f}", flush=True)
    kinds = args.kinds.split(",")
    header = " | ".join(f"{k} CV SetF | {k} CV nDCG@5" for k in kinds)
    print(f"\n| variant | {header} | mean |\n|" + " --- |" * (2 * len(kinds) + 2))
    for name, values in results.items():
        print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in values) + f" | {np.mean(values):.4f} |")


if __name__ == "__main__":
    main()
