"""Choose ``rank_ptkb``'s ``history_turns``, ``history_responses`` and ``history_weight`` on the iKAT 2023 TRAIN
topics (PTKB labels: the topics' ``ptkb_provenance``), then report the chosen settings on the TEST topics against
NIST's PTKB qrels and the organizers' labels. The history is what the stage reads: the raw utterances of the
previous turns and their canonical responses (which the organizers give automatic runs too). Queries: raw
utterances (automatic) first, then resolved utterances (manual). The best of the grid on train is chosen (ties: the
lower weight, then fewer turns and responses), also the best with utterances alone (the setting of before).

    python bench/tune_ptkb_history.py [--data ../shared/ikat/2023] [--model bundled:minilm]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

MEASURE = "nDCG@5"
TURNS = (0, 1, 2, 3, 5, 100)
RESPONSES = (0, 1, 2, 3)
WEIGHTS = tuple(round(0.1 * i, 1) for i in range(1, 11))


def provenance_qrels(topics) -> dict[str, dict[str, int]]:  # noqa: ANN001
    """Every statement of a conversation judged 0/1 for each turn whose ptkb_provenance is not empty."""
    return {turn.qid: {key: int(key in turn.ptkb_provenance) for key in topics.conversation_of(turn.qid).ptkb}
            for turn in topics if turn.ptkb_provenance}


def figures(ranker, topics, kind: str, qrels, turns: int, weight: float,  # noqa: ANN001
            responses: int = 0) -> dict[str, float]:
    from ikatkit.evaluate.ptkb import evaluate_ptkb
    from ikatkit.rank.standalone import rank_topics_ptkb

    rankings = {qid: dict(ranked) for qid, ranked in rank_topics_ptkb(
        topics, topics.queries(kind), ranker, history_turns=turns, history_weight=weight,
        history=topics.queries("raw"), history_responses=responses).items()}
    return {m: round(v, 4) for m, v in evaluate_ptkb(rankings, qrels).mean.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/ikat/2023")
    parser.add_argument("--model", default="bundled:minilm")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.rank import make_ranker
    from ikatkit.topics import load_topics

    train, test = load_topics(args.data / "train_topics.json"), load_topics(args.data / "test_topics.json")
    organizers = load_qrels(args.data / "ptkb_qrels.organizers.txt")
    assert provenance_qrels(test) == organizers, "the organizers' labels are the topics' ptkb_provenance"
    train_qrels, nist = provenance_qrels(train), load_qrels(args.data / "ptkb_qrels.nist.txt")
    with tempfile.TemporaryDirectory() as cache:
        ranker = make_ranker("bi-encoder", args.model, cache_dir=cache)
        report = {"train_turns_judged": len(train_qrels)}
        for kind in ("raw", "manual"):
            grid = {(turns, responses, weight): figures(ranker, train, kind, train_qrels, turns, weight,
                                                        responses)[MEASURE]
                    for turns in TURNS for responses in RESPONSES for weight in WEIGHTS if turns or responses}
            none = figures(ranker, train, kind, train_qrels, 0, 0.0)[MEASURE]

            def best_of(keys: list[tuple[int, int, float]]) -> tuple[tuple[int, int, float], float]:
                key = max(keys, key=lambda k: (grid[k], -k[2], -k[0], -k[1]))
                return (key, grid[key]) if grid[key] > none else ((0, 0, 0.0), none)

            chosen, best = best_of(list(grid))
            utterances, best_utterances = best_of([k for k in grid if not k[1]])
            settings = {"chosen": chosen, "utterances_only": utterances, "seed_setting_3_turns_0.3": (3, 0, 0.3)}
            report[kind] = {
                "train": {"no_history": none, "best": best, "history_turns": chosen[0],
                          "history_responses": chosen[1], "history_weight": chosen[2],
                          "utterances_only": {"best": best_utterances, "history_turns": utterances[0],
                                              "history_weight": utterances[2]},
                          "seed_setting_3_turns_0.3": grid[(3, 0, 0.3)]},
                "test_nist": {"no_history": figures(ranker, test, kind, nist, 0, 0.0),
                              **{name: figures(ranker, test, kind, nist, t, w, r)
                                 for name, (t, r, w) in settings.items()}},
                "test_organizers": {"no_history": figures(ranker, test, kind, organizers, 0, 0.0)[MEASURE],
                                    **{name: figures(ranker, test, kind, organizers, t, w, r)[MEASURE]
                                       for name, (t, r, w) in settings.items()}},
            }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
