"""The choice of the shipped PTKB default (issue 62): cross-validation grouped by conversation over ALL of 2023.

The rule, written (and committed) before any 2025 figure of these candidates was computed:

- Labels: the 2023 train topics' ``ptkb_provenance`` (42 turns) and the 2023 test topics' NIST PTKB qrels
  (98 judged turns; binary: grade 1 relevant; a statement of a judged turn without a judgement is not relevant),
  140 turns of 33 conversations. Raw utterances (what an automatic or interactive system has).
- 5-fold cross-validation grouped by conversation (scikit-learn's GroupKFold) over the 140 turns; every parameter
  of a candidate (threshold, fraction, k) is chosen inside each outer fold on its training folds alone (their
  own grouped 5-fold out-of-fold probabilities, or their rankings), then applied to the held-out fold.
- The score: the mean per-turn F1 (SetF) of the held-out turns. The candidate with the best score is shipped;
  where two are within 0.005 the simpler one (fewer learned parts: a ranking before a model) is shipped.
- 2025 (NIST PTKB qrels) is the one test, computed once for the shipped candidate; nothing of 2025 is read here.

Candidates: rank_ptkb with the last 2 responses (``ptkb_model.RANKED``; a train-only choice of an earlier round)
citing its top k (k in 1-5) or the top fraction f of the PTKB (``max(1, round(f * n))``, f in 0.05-0.50); a
logistic model over the ``responses`` features (scores, gaps, 1 / rank) or over the ``relative`` features (the
same read relative to the PTKB: gaps, z-scores within the PTKB, the share ranked above), each with the
at-least-one threshold, the expected-F1 set (no parameter) or the top fraction of the PTKB.

    python bench/ptkb_default_cv.py [--data ../shared/ikat] [--model bundled:minilm]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

FRACTIONS = tuple(round(0.05 * i, 2) for i in range(1, 11))
KS = (1, 2, 3, 4, 5)
SETS = ("responses", "relative")
RULES = ("at-least-one", "expected-f1", "fraction")
SHIPPED = ("relative", "expected-f1")  # the rule's choice (CV SetF 0.4844; docs/ptkb-classification.md)


def all_2023(data: Path, model: str):  # noqa: ANN201
    """The labelled rows of all of 2023 (train provenance, test NIST qrels), raw utterances."""
    from ikatkit.evaluate.ptkb_classify import ptkb_qrels_keys
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.rank import make_ranker
    from ikatkit.rank import ptkb_model as pm
    from ikatkit.topics import load_topics

    ranker = make_ranker("bi-encoder", model)
    train, test = load_topics(data / "2023/train_topics.json"), load_topics(data / "2023/test_topics.json")
    qrels = ptkb_qrels_keys(load_qrels(data / "2023/ptkb_qrels.nist.txt"))
    return pm.joined([pm.training_data(train, train.queries("raw"), ranker),
                      pm.training_data(test, test.queries("raw"), ranker, labels=pm.qrels_labels(qrels, test))])


def subset(data, rows: np.ndarray):  # noqa: ANN001, ANN201
    return replace(data, table=data.table[rows], truth=data.truth[rows], qids=[data.qids[i] for i in rows],
                   groups=[data.groups[i] for i in rows])


def turns_of(data) -> list[np.ndarray]:  # noqa: ANN001
    from ikatkit.rank.ptkb_model import _turn_rows

    return _turn_rows(data.qids)


def mean_f1(data, scores: np.ndarray, pick: Callable[[np.ndarray], np.ndarray]) -> float:  # noqa: ANN001
    from ikatkit.rank.ptkb_model import turn_f1

    return float(np.mean([turn_f1(pick(scores[rows]), data.truth[rows] == 1) for rows in turns_of(data)]))


def top(scores: np.ndarray, k: int) -> np.ndarray:
    picked = np.zeros(len(scores), bool)
    picked[np.argsort(-scores, kind="stable")[:k]] = True
    return picked


def fraction_k(f: float, n: int) -> int:
    return max(1, math.floor(f * n + 0.5))


def features(name: str) -> tuple[str, ...]:
    from ikatkit.rank import ptkb_model as pm

    return pm.FEATURE_SETS[name]


def choose(data, scores: np.ndarray, rule: str):  # noqa: ANN001, ANN201
    """The rule's parameter chosen on ``data`` (training folds) with these scores, and the pick it makes."""
    from ikatkit.rank import ptkb_model as pm

    if rule == "expected-f1":
        return None, lambda p: pm.picked(p, 0.0, "expected-f1")
    if rule == "at-least-one":
        t = pm.best_threshold(scores, data.truth, data.qids, "at-least-one")
        return t, lambda p, t=t: (p >= t) if (p >= t).any() else top(p, 1)
    options = KS if rule == "top-k" else FRACTIONS
    picks = {o: (lambda p, k=o: top(p, k)) if rule == "top-k" else (lambda p, f=o: top(p, fraction_k(f, len(p))))
             for o in options}
    best = max(options, key=lambda o: (mean_f1(data, scores, picks[o]), -options.index(o)))
    return best, picks[best]


def cross_validate(data) -> dict[str, tuple[float, list]]:  # noqa: ANN001
    """Each candidate's held-out mean per-turn F1 and the parameter each outer fold chose."""
    from ikatkit.rank import ptkb_model as pm

    ranked = data.table[:, pm.ALL_FEATURES.index("ranked_score")]
    candidates: dict[str, tuple[float, list]] = {}
    folds = pm.cv_folds(data, 5)
    for rule in ("top-k", "fraction"):
        held, chosen = np.zeros(len(data.truth), bool), []
        for train, rows in folds:
            parameter, pick = choose(subset(data, train), ranked[train], rule)
            chosen.append(parameter)
            for turn in turns_of(subset(data, rows)):
                held[rows[turn]] = pick(ranked[rows[turn]])
        candidates[f"rank_ptkb 2 responses, {rule}"] = (mean_f1(data, held.astype(float), lambda p: p > 0), chosen)
    for name in SETS:
        for rule in RULES:
            held, chosen = np.zeros(len(data.truth), bool), []
            for train, rows in folds:
                inner = subset(data, train)
                parameter, pick = choose(inner, pm.out_of_fold(inner, features(name), 5), rule)
                chosen.append(parameter)
                outer = pm.fit_model(inner, features(name), "bi-encoder", "").probabilities_of(data.table[rows])
                for turn in turns_of(subset(data, rows)):
                    held[rows[turn]] = pick(np.array(outer)[turn])
            candidates[f"logistic {name}, {rule}"] = (mean_f1(data, held.astype(float), lambda p: p > 0), chosen)
    return candidates


def calibration(data) -> None:  # noqa: ANN001
    """The shipped candidate's out-of-fold probabilities against the labels: per fifth of the statements by
    probability, the mean probability and the share relevant; the Brier score; the mean count cited a turn."""
    from ikatkit.rank import ptkb_model as pm

    p = pm.out_of_fold(data, features(SHIPPED[0]), 5)
    order = np.argsort(p, kind="stable")
    print("| statements (by out-of-fold p) | mean p | share relevant |\n| --- | --- | --- |")
    for part in np.array_split(order, 5):
        print(f"| {len(part)} from p {p[part].min():.3f} | {p[part].mean():.4f} | {data.truth[part].mean():.4f} |")
    cited = [int(pm.picked(p[rows], 0.0, SHIPPED[1]).sum()) for rows in turns_of(data)]
    print(f"Brier {np.mean((p - data.truth) ** 2):.4f}; sum of p {p.sum():.1f} against {int(data.truth.sum())} "
          f"relevant; {np.mean(cited):.2f} statements cited a turn (relevant {data.truth.sum() / len(cited):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/ikat"))
    parser.add_argument("--model", default="bundled:minilm")
    parser.add_argument("--calibration", action="store_true",
                        help="only the shipped candidate's out-of-fold calibration (grouped 5-fold CV over all 2023)")
    parser.add_argument("--write", type=Path, help="write the chosen model, fitted on all of 2023, here (the "
                                                   "shipped one: src/ikatkit/data/ptkb/default.json)")
    args = parser.parse_args()
    data = all_2023(args.data, args.model)
    if args.calibration:
        calibration(data)
        return
    if args.write:
        from ikatkit.rank import ptkb_model as pm

        stated = {"topics": "2023 train topics (ptkb_provenance) + 2023 test topics (NIST PTKB qrels, grade >= 1)",
                  "queries": "raw", "chosen_by": "bench/ptkb_default_cv.py"}
        model = pm.fit_model(data, features(SHIPPED[0]), "bi-encoder", args.model, decision=SHIPPED[1], stated=stated)
        model.save(args.write)
        print(f"{SHIPPED[0]} features, {SHIPPED[1]} -> {args.write}")
        return
    print(f"{len(set(data.qids))} turns of {len(set(data.groups))} conversations, {int(data.truth.sum())} of "
          f"{len(data.truth)} statements relevant")
    print("\n| candidate | CV SetF (140 turns, raw) | chosen per fold |\n| --- | --- | --- |")
    for name, (score, chosen) in cross_validate(data).items():
        said = ", ".join("-" if c is None else f"{c:.4g}" for c in chosen)
        print(f"| {name} | {score:.4f} | {said} |")


if __name__ == "__main__":
    main()
