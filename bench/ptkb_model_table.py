"""The tables of docs/ptkb-classification.md: trained PTKB models against the baselines, with a paired test per turn.

Trains the models on the iKAT 2023 TRAIN topics only (``ptkb_provenance``; threshold by 5-fold cross-validation
grouped by conversation), first printing the cross-validated choices of the feature set and of the decision rule
(train only), then reports on the 2023 TEST topics (NIST PTKB qrels, binary) and the 2025 test topics (NIST PTKB
qrels, grades 0-4, at grade >= 1 and >= 2): SetP/SetR/SetF, micro F1, and the two-sided paired t-test (and
sign-flip randomization test) of the per-turn F1 against the top-3 ranking, each model under both decision rules
(``ptkb_model.THRESHOLD_RULES``); then PTKB nDCG@5 of the rankings. Raw utterances (what an automatic or interactive
system has) and resolved ones (manual).

    python bench/ptkb_model_table.py [--data ../shared/ikat] [--model bundled:minilm] [--finetune bi]
        [--epochs N] [--ft-features conversation] [--models DIR] [--skip-cv] [--kinds raw,manual]

``--finetune`` adds the model with MiniLM fine-tuned on the train labels (the variant chosen by
bench/ptkb_finetune_cv.py); ``--models DIR`` keeps it as ``DIR/finetuned-raw.json`` and ``-manual.json`` (with
their ``.finetuned`` folders) and reuses such files (e.g. written by ``ikatkit train-ptkb-classifier ...``)
instead of training again. It scores the judged turns only (the measures read no other).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
import tempfile
from pathlib import Path

CANDIDATES = {  # the feature sets compared by cross-validation on train (the choice: the best mean of 4 figures);
    # a name alone: that set of ptkb_model.FEATURE_SETS
    "turn": "turn",
    "conversation": "conversation",
    "turn + history": ("score", "gap_to_best", "reciprocal_rank", "history_gap", "history_rank"),
    "turn + history + responses": ("score", "gap_to_best", "reciprocal_rank", "recent_gap", "last_response_gap"),
    "every feature": "ALL",
    "responses": "responses",
    "ranked only": ("ranked_score", "ranked_gap", "ranked_rank"),
}
RANKED_GRID = tuple((r, round(0.1 * w, 1)) for r in (1, 2, 3) for w in range(1, 11))
"""The (responses, weight) of the ranked_* features chosen inside each fold (nested: bench/tune_ptkb_history.py
chose (2, 0.8) on every train turn, so the held-out fold must not see that choice)."""


def decisions_cross_validated(train, ranker) -> None:  # noqa: ANN001
    """Out-of-fold mean per-turn F1 of decision rules over the same out-of-fold probabilities, train only: the
    threshold (chosen on them), at least one (the most probable where none reaches the threshold; the threshold
    chosen under that rule), expected F1 (no parameter), relative (p >= r * the turn's best p, r by CV) and top-k
    (k by CV)."""
    import numpy as np

    from ikatkit.rank import ptkb_model as pm

    print("\n| utterances | features | threshold | at-least-one | expected F1 | relative (r) | top-k (k) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind in ("raw", "manual"):
        data = pm.training_data(train, train.queries(kind), ranker)
        turns = [np.array([q == qid for q in data.qids]) for qid in dict.fromkeys(data.qids)]
        for features in ("turn", "conversation"):
            oof = pm.out_of_fold(data, pm.FEATURE_SETS[features], 5)

            def mean(rule, oof=oof):  # noqa: ANN001, ANN202
                return float(np.mean([pm.turn_f1(rule(oof[rows]), data.truth[rows] == 1) for rows in turns]))

            rules = {d: pm.mean_turn_f1(oof, data.truth, data.qids, pm.best_threshold(oof, data.truth, data.qids, d),
                                        d) for d in pm.THRESHOLD_RULES}
            relative = max((mean(lambda p, r=r: p >= r * p.max()), round(r, 2)) for r in np.arange(0.05, 1.0, 0.05))
            top = max((mean(lambda p, k=k: np.argsort(np.argsort(-p, kind="stable"), kind="stable") < k), k)
                      for k in range(1, 6))
            expected = mean(lambda p: pm.picked(p, 0.0, "expected-f1"))
            print(f"| {kind} | {features} | {rules['threshold']:.4f} | {rules['at-least-one']:.4f} | "
                  f"{expected:.4f} | {relative[0]:.4f} ({relative[1]}) | {top[0]:.4f} ({top[1]}) |")


def _ndcg(scores, data, rows) -> float:  # noqa: ANN001
    """nDCG@5 of the rows' scores, each row's turn ranked against its labels."""
    from ikatkit.evaluate.ptkb import evaluate_ptkb

    ranks: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for i in rows:
        ranks.setdefault(data.qids[i], {})[str(i)] = float(scores[i])
        qrels.setdefault(data.qids[i], {})[str(i)] = int(data.truth[i])
    return evaluate_ptkb(ranks, qrels).mean["nDCG@5"]


def nested_out_of_fold(tables, features, folds: int = 5, extra=None):  # noqa: ANN001, ANN201
    """Each row's out-of-fold probability, the ranked_* features' (responses, weight) chosen on the fold's training
    rows alone (the best nDCG@5 of rank_ptkb's ranking there; ties: the lower weight, then fewer responses), and
    the settings chosen; ``extra``: a column of scores beside the features (a fine-tuned model's, out of fold)."""
    import numpy as np

    from ikatkit.rank import ptkb_model as pm

    first = tables[RANKED_GRID[0]]
    columns = [pm.ALL_FEATURES.index(name) for name in features]
    score = pm.ALL_FEATURES.index("ranked_score")
    probabilities, chosen = np.zeros(len(first.truth)), []
    for train_rows, held_out in pm.cv_folds(first, folds):
        setting = max(RANKED_GRID, key=lambda g: (_ndcg(tables[g].table[:, score], tables[g], train_rows), -g[1],
                                                  -g[0]))
        chosen.append(setting)
        table = tables[setting].table[:, columns]
        if extra is not None:
            table = np.column_stack([table, extra])
        everything = list(range(table.shape[1]))
        scaler, fitted = pm._fit(table[train_rows], first.truth[train_rows], everything, 1.0)
        probabilities[held_out] = fitted.predict_proba(scaler.transform(table[held_out]))[:, 1]
    return probabilities, chosen


def cross_validated(train, ranker) -> None:  # noqa: ANN001
    """Out-of-fold SetF (at the out-of-fold threshold) and nDCG@5 of each candidate feature set, train only; the
    sets with ranked_* features nested (:func:`nested_out_of_fold`)."""
    import numpy as np

    from ikatkit.rank import ptkb_model as pm

    print("| feature set | raw CV SetF | raw CV nDCG@5 | resolved CV SetF | resolved CV nDCG@5 | mean |")
    print("| --- | --- | --- | --- | --- | --- |")
    tables = {kind: {g: pm.training_data(train, train.queries(kind), ranker, ranked=g) for g in RANKED_GRID}
              for kind in ("raw", "manual")}
    settings, least = {}, {}
    for name, features in CANDIDATES.items():
        figures = []
        for kind, by_setting in tables.items():
            found = by_setting[pm.RANKED]
            names = pm.ALL_FEATURES if features == "ALL" else pm.FEATURE_SETS.get(features, features)
            if pm.reads_ranking(names):
                oof, settings[kind] = nested_out_of_fold(by_setting, names)
            else:
                oof = pm.out_of_fold(found, names, 5)
            figures.append(pm.mean_turn_f1(oof, found.truth, found.qids, pm.best_threshold(oof, found.truth,
                                                                                           found.qids)))
            figures.append(_ndcg(oof, found, range(len(oof))))
            if name == "responses":
                rule = "at-least-one"
                least[kind] = pm.mean_turn_f1(oof, found.truth, found.qids,
                                              pm.best_threshold(oof, found.truth, found.qids, rule), rule)
        print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in figures) + f" | {np.mean(figures):.4f} |")
    print("ranked_* (responses, weight) chosen per fold: " + "; ".join(f"{k} {v}" for k, v in settings.items()))
    print("responses, CV SetF under at-least-one: " + ", ".join(f"{k} {v:.4f}" for k, v in least.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/ikat")
    parser.add_argument("--model", default="bundled:minilm")
    parser.add_argument("--finetune", help="add the model over MiniLM fine-tuned so (ptkb_model.FINETUNE)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--ft-features", default="none", help="the fine-tuned model's other features")
    parser.add_argument("--models", type=Path, help="where the fine-tuned models are kept (default: not kept)")
    parser.add_argument("--skip-cv", action="store_true", help="leave out the cross-validation tables")
    parser.add_argument("--kinds", default="raw,manual", help="the utterances of the tables (default %(default)s)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ikatkit.evaluate.ptkb import evaluate_ptkb
    from ikatkit.evaluate.ptkb_classify import classify_ptkb, ptkb_qrels_keys
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.evaluate.significance import paired_test
    from ikatkit.rank import make_ranker
    from ikatkit.rank.base import PTKB_HISTORY_WEIGHT
    from ikatkit.rank.ptkb_model import THRESHOLD_RULES, PtkbModel, topic_turns, train_model
    from ikatkit.rank.standalone import rank_topics_ptkb
    from ikatkit.topics import load_topics

    train = load_topics(args.data / "2023/train_topics.json")
    collections = [("2023 test", load_topics(args.data / "2023/test_topics.json"),
                    load_qrels(args.data / "2023/ptkb_qrels.nist.txt"), (1,)),
                   ("2025", load_topics(args.data / "2025-released/2025_test_topics.json"),
                    load_qrels(args.data / "2025-released/qrels-ptkb-nist.trec"), (1, 2))]
    with tempfile.TemporaryDirectory() as cache:
        ranker = make_ranker("bi-encoder", args.model, cache_dir=cache)
        if not args.skip_cv:
            cross_validated(train, ranker)
            decisions_cross_validated(train, ranker)
        for kind in args.kinds.split(","):
            trained = {fs: train_model(train, train.queries(kind), ranker, "bi-encoder", args.model, fs)
                       for fs in ("turn", "conversation", "responses")}
            if args.finetune:
                kept = (args.models or Path(cache)) / f"finetuned-{kind}.json"
                if not kept.exists():
                    train_model(train, train.queries(kind), ranker, "bi-encoder", args.model, args.ft_features,
                                finetune=args.finetune, epochs=args.epochs).save(kept)
                trained["fine-tuned"] = PtkbModel.load(kept)
                if "thresholds" not in trained["fine-tuned"].trained_on:
                    raise SystemExit(f"{kept} states no threshold per decision rule (an older file): delete it, or "
                                     "pass another --models, to train it again")
            # one fit per model: the rules differ in the threshold alone, each stated in trained_on
            models = {(fs, d): replace(m, decision=d, threshold=m.trained_on["thresholds"][d])
                      for fs, m in trained.items() for d in THRESHOLD_RULES}
            print(f"\n{kind} utterances; thresholds: " + ", ".join(f"{fs}, {d} {m.threshold:.4f} (data "
                                                                   f"{m.trained_on['fingerprint']})"
                                                                   for (fs, d), m in models.items()))
            print("| collection | system | SetP | SetR | SetF | F1_micro | SetF - top-3 | p (t) | p (rand.) |")
            print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
            for name, topics, qrels, rels in collections:
                queries = topics.queries(kind)
                plain = rank_topics_ptkb(topics, queries, ranker)
                history = rank_topics_ptkb(topics, queries, ranker, history_turns=2,
                                           history_weight=PTKB_HISTORY_WEIGHT, history=topics.queries("raw"))
                responses = rank_topics_ptkb(topics, queries, ranker, history_responses=2,
                                             history_weight=PTKB_HISTORY_WEIGHT)
                turns = {q: t for q, t in topic_turns(topics, queries).items() if q in qrels}
                ranked = {fs: {q: m.ranked(ranker, t) for q, t in turns.items()} for fs, m in trained.items()}
                names = {"turn": "old model (turn features)", "conversation": "conversation model",
                         "responses": "responses model",
                         "fine-tuned": f"fine-tuned ({args.finetune}, {args.epochs} epochs, + {args.ft_features})"}
                systems = {"cite all": {q: dict(r) for q, r in plain.items()},
                           "top-1": {q: dict(r[:1]) for q, r in plain.items()},
                           "top-3": {q: dict(r[:3]) for q, r in plain.items()},
                           "rank_ptkb 2 responses, top-3": {q: dict(r[:3]) for q, r in responses.items()},
                           **{f"{names[fs]}, {d}": {q: dict(m.choose(r)) for q, r in ranked[fs].items()}
                              for (fs, d), m in models.items()}}
                for rel in rels:
                    results = {s: classify_ptkb(cited, qrels, rel, topics) for s, cited in systems.items()}
                    base = results["top-3"]
                    for system, result in results.items():
                        m = result.mean
                        f = f"SetF(rel={rel})"
                        a = [base.per_query[q][f] for q in base.per_query]
                        b = [result.per_query[q][f] for q in base.per_query]
                        tests = ("", "") if system == "top-3" else (
                            f"{paired_test(a, b):.3f}", f"{paired_test(a, b, 'randomization'):.3f}")
                        print(f"| {name}, rel={rel} | {system} | {m[f'SetP(rel={rel})']:.4f} | "
                              f"{m[f'SetR(rel={rel})']:.4f} | {m[f]:.4f} | {m[f'F1_micro(rel={rel})']:.4f} | "
                              f"{m[f] - base.mean[f]:+.4f} | {tests[0]} | {tests[1]} |")
                keyed = ptkb_qrels_keys(qrels)
                orders = {"plain ranking": plain, "rank_ptkb history 2 turns, 0.8": history,
                          "rank_ptkb 2 responses, 0.8": responses, "old model": ranked["turn"],
                          "conversation model": ranked["conversation"], "responses model": ranked["responses"]}
                if "fine-tuned" in ranked:
                    orders["fine-tuned"] = ranked["fine-tuned"]
                print(f"{name} nDCG@5: " + ", ".join(
                    f"{o} {evaluate_ptkb({q: dict(r) for q, r in lists.items()}, keyed).mean['nDCG@5']:.4f}"
                    for o, lists in orders.items()))


if __name__ == "__main__":
    main()
