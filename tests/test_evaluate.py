"""Evaluation on real data: the reference run's published scores, qrels counts, PTKB evaluation."""

from __future__ import annotations

import json

import pytest

from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import evaluate
from ikatkit.evaluate.measures import TREC_EVAL_NAMES
from ikatkit.evaluate.ptkb import evaluate_ptkb
from ikatkit.evaluate.qrels import load_qrels


def test_reference_run_reproduces_published_scores(ikat2023):
    published = json.loads((ikat2023 / "reference_run" / "splade_deberta_perf.json").read_text())
    run = json.loads((ikat2023 / "reference_run" / "splade_deberta_run.json").read_text())
    result = evaluate(run, ikat2023 / "qrels.txt", list(published))
    assert len(result.evaluated) == 176 and result.missing == []
    for name, value in published.items():
        assert result.mean[name] == pytest.approx(value, abs=1e-6), (name, TREC_EVAL_NAMES[name])


def test_qrels_counts_and_errors(ikat2023, tmp_path, caplog):
    qrels = load_qrels(ikat2023 / "qrels.txt")
    assert sum(len(d) for d in qrels.values()) == 34183
    assert len(qrels) == 176
    assert len({d for docs in qrels.values() for d in docs}) == 27238
    bad = tmp_path / "bad.txt"
    bad.write_text("9-1_3 0 clueweb22-en0000-00-00251:12 0\n9-1_3 0 clueweb22-en0000-06-17856:4\n")
    with pytest.raises(IkatError, match=r"bad.txt \(line 2\): expected 'qid 0 docid grade'"):
        load_qrels(bad)
    line = "9-1_3 0 clueweb22-en0000-00-00251:12 2\n"
    repeated = tmp_path / "repeated.txt"
    repeated.write_text(line + "9-1_3 0 clueweb22-en0000-00-00251:13 0\n" + line)
    with caplog.at_level("WARNING"):
        assert load_qrels(repeated) == {"9-1_3": {"clueweb22-en0000-00-00251:12": 2, "clueweb22-en0000-00-00251:13": 0}}
    assert "1 repeated qrels lines" in caplog.text
    repeated.write_text(line + line.replace(" 2\n", " 1\n"))
    with pytest.raises(IkatError, match=r"repeated.txt \(line 2\): .* judged 2 on line 1 and 1 here"):
        load_qrels(repeated)


def test_missing_turns_count_zero_only_when_asked(ikat2023):
    run = json.loads((ikat2023 / "reference_run" / "splade_deberta_run.json").read_text())
    qrels = load_qrels(ikat2023 / "qrels.txt")
    half = dict(list(run.items())[:100])
    skipped = evaluate(half, qrels, ["nDCG@5"])
    zeroed = evaluate(half, qrels, ["nDCG@5"], missing="zero")
    assert len(skipped.evaluated) + len(skipped.missing) == 176
    assert zeroed.mean["nDCG@5"] == pytest.approx(skipped.mean["nDCG@5"] * len(skipped.evaluated) / 176)


def test_ptkb_gold_ranking_is_perfect_against_organizers_labels(ikat2023):
    from ikatkit.topics import load_topics

    topics = load_topics(ikat2023 / "test_topics.json")
    gold = {t.qid: {k: 1.0 / (i + 1) for i, k in enumerate(t.ptkb_provenance)} for t in topics}
    result = evaluate_ptkb(gold, ikat2023 / "ptkb_qrels.organizers.txt")
    assert len(result.evaluated) == 112
    assert result.mean["nDCG@5"] == pytest.approx(1.0) and result.mean["AP"] == pytest.approx(1.0)


def test_wrong_inputs_are_named_not_scored_zero(ikat2023, caplog):
    """PTKB qrels given to passage evaluation (and the reverse), another year's turn ids: one error each, with the
    likely fix; a run whose top 10 is barely judged: a warning with the share."""
    run = json.loads((ikat2023 / "reference_run" / "splade_deberta_run.json").read_text())
    with pytest.raises(IkatError, match=r"no id the run ranks on its 98 judged turns occurs .* these look like PTKB "
                                        r"qrels .*use `ikatkit eval-ptkb`"):
        evaluate(run, ikat2023 / "ptkb_qrels.nist.txt")
    ptkb = {qid: {"1": 2.0, "2": 1.0} for qid in run}
    with pytest.raises(IkatError, match="these look like passage qrels"):
        evaluate(ptkb, ikat2023 / "qrels.txt")
    shifted = {f"2024-{qid}": docs for qid, docs in run.items()}  # turn ids of no 2023 conversation
    first = next(iter(shifted))
    with pytest.raises(IkatError, match=rf"none of its {len(run)} turn ids ranking something \(e.g. '{first}'.*\) is "
                                        r"among the qrels' turn ids \(e.g. '9-1_3'"):
        evaluate(shifted, ikat2023 / "qrels.txt")
    qrels = load_qrels(ikat2023 / "qrels.txt")
    judged = sorted(qrels)
    sparse = {q: dict([(next(iter(qrels[q])), 100.0)] + [(f"x:{i}", 99.0 - i) for i in range(99)])
              for q in judged[:3]}
    sparse.update({q: {f"x:{i}": 99.0 - i for i in range(99)} | {next(iter(qrels[q])): 0.5} for q in judged[3:]})
    with caplog.at_level("WARNING"):
        evaluate(sparse, qrels, ["nDCG@5"])
    share = 3 / (10 * len(judged))  # 3 judged ids in the top 10 of the 176 judged turns
    assert f"only {100 * share:.1f}% of the run's top-10 ids on its 176 judged turns are judged" in caplog.text
