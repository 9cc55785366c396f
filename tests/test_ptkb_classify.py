"""PTKB classification (eval-ptkb --classify): P/R/F1 of cited statements, cross-checked with scikit-learn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sklearn.metrics import precision_recall_fscore_support

from conftest import IKAT_DATA
from ikatkit.cli import main
from ikatkit.errors import IkatError
from ikatkit.evaluate.ptkb_classify import classify_ptkb, normalise_statement, ptkb_qrels_keys
from ikatkit.evaluate.qrels import load_qrels
from ikatkit.topics import load_topics

RELEASED = IKAT_DATA / "2025-released"


@pytest.fixture(scope="module")
def released() -> Path:
    if not (RELEASED / "qrels-ptkb-nist.trec").exists():
        pytest.skip(f"the 2025 release not found at {RELEASED} (set IKAT_DATA)")
    return RELEASED


def _sklearn(cited: dict[str, list[str]], qrels: dict[str, dict[str, int]], rel: int) -> tuple[dict, list]:
    """Micro P/R/F1 over every judged (turn, statement) pair and per-turn (P, R, F1), by scikit-learn."""
    truth, guess, per_turn = [], [], []
    for qid, judged in qrels.items():
        keys = list(judged) + [k for k in cited.get(qid, []) if k not in judged]
        t = [int(judged.get(k, 0) >= rel) for k in keys]
        g = [int(k in cited.get(qid, [])) for k in keys]
        truth += t
        guess += g
        per_turn.append(precision_recall_fscore_support(t, g, average="binary", zero_division=0)[:3])
    micro = precision_recall_fscore_support(truth, guess, average="binary", zero_division=0)[:3]
    return dict(zip("PRF", micro)), per_turn


def test_2025_keys_and_texts_against_sklearn(released: Path, tmp_path: Path) -> None:
    topics = load_topics(released / "2025_test_topics.json")
    qrels = load_qrels(released / "qrels-ptkb-nist.trec")
    keyed = ptkb_qrels_keys(qrels)
    assert keyed["1-1_3"]["1"] == qrels["1-1_3"]["ptkb-1-1-0"]  # 0-based index -> ikatkit's 1-based key
    ptkb = topics.conversation("1-1").ptkb
    # a 2025 JSONL run over two judged turns: one statement as released, one with its ';' dropped and its case
    # changed (normalised match), one that is no statement of the conversation (unmapped, counted)
    first, second = ptkb["16"], ptkb["8"]
    records = [{"metadata": {"team_id": "t", "run_id": "r", "run_type": "automatic"}, "turn_id": "1-1_3",
                "responses": [{"rank": 1, "text": "x", "citations": {},
                               "ptkb_provenance": [first, second.rstrip(";").upper(), "I own a spaceship"]}],
                "references": {}},
               {"metadata": {"team_id": "t", "run_id": "r", "run_type": "automatic"}, "turn_id": "1-1_4",
                "responses": [{"rank": 1, "text": "x", "citations": {}, "ptkb_provenance": []}], "references": {}}]
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "result.json"
    code = main(["eval-ptkb", str(run), "--qrels", str(released / "qrels-ptkb-nist.trec"), "--topics",
                 str(released / "2025_test_topics.json"), "--classify", "--rel", "2", "--format", "json",
                 "--per-query", "--out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["info"]["statements"]["exact"] == 1 and result["info"]["statements"]["normalised"] == 1
    assert result["info"]["statements"]["unmapped"] == 1
    assert result["evaluated"] == 2 and len(result["missing"]) == len(qrels) - 2
    cited = {"1-1_3": ["16", "8"], "1-1_4": []}
    micro, per_turn = _sklearn(cited, {q: keyed[q] for q in cited}, 2)
    assert result["mean"]["P_micro(rel=2)"] == pytest.approx(micro["P"])
    assert result["mean"]["R_micro(rel=2)"] == pytest.approx(micro["R"])
    assert result["mean"]["F1_micro(rel=2)"] == pytest.approx(micro["F"])
    for name, i in (("SetP(rel=2)", 0), ("SetR(rel=2)", 1), ("SetF(rel=2)", 2)):
        assert result["mean"][name] == pytest.approx(sum(t[i] for t in per_turn) / 2)
    # by hand: 1-1_3 grades ptkb-1-1-15 = 3 (key 16) and ptkb-1-1-7 = 1 (key 8): one of two cited is relevant
    assert result["per_query"]["1-1_3"]["SetP(rel=2)"] == pytest.approx(0.5)


def test_cite_all_at_every_grade_matches_sklearn(released: Path) -> None:
    topics = load_topics(released / "2025_test_topics.json")
    qrels = load_qrels(released / "qrels-ptkb-nist.trec")
    keyed = ptkb_qrels_keys(qrels)
    everything = {qid: dict.fromkeys(topics.conversation_of(qid).ptkb, 1.0) for qid in topics.qids}
    for rel in (1, 2, 3):
        result = classify_ptkb(everything, qrels, rel, topics)
        micro, per_turn = _sklearn({q: list(s) for q, s in everything.items()}, keyed, rel)
        assert result.mean[f"R_micro(rel={rel})"] == pytest.approx(1.0)
        assert result.mean[f"P_micro(rel={rel})"] == pytest.approx(micro["P"])
        assert result.mean[f"SetF(rel={rel})"] == pytest.approx(sum(t[2] for t in per_turn) / len(per_turn))
    # ir-measures' set measures (trec_eval's set_P, set_recall, set_F) agree on a run citing statements 1-5
    import ir_measures
    from ir_measures import SetF, SetP, SetR

    five = {qid: {str(k): 1.0 for k in range(1, 6)} for qid in keyed}
    for rel in (1, 2):
        ours = classify_ptkb(five, qrels, rel, topics).mean
        theirs = ir_measures.calc_aggregate([SetP(rel=rel), SetR(rel=rel), SetF(rel=rel)], keyed, five)
        for measure, value in theirs.items():  # named "SetP" at rel=1 (its default), "SetP(rel=2)" else
            assert ours[f"{str(measure).split('(')[0]}(rel={rel})"] == pytest.approx(value)
    # cite none: a prediction, not a missing turn: every turn evaluated, all measures 0
    none = classify_ptkb({qid: {} for qid in topics.qids}, qrels, 1, topics)
    assert len(none.evaluated) == len(qrels) and set(none.mean.values()) == {0.0}


def test_2023_binary_qrels(ikat2023: Path) -> None:
    topics = load_topics(ikat2023 / "test_topics.json")
    qrels = load_qrels(ikat2023 / "ptkb_qrels.nist.txt")
    gold = {t.qid: list(t.ptkb_provenance) for t in topics}  # the organizers' labels judged by NIST's
    result = classify_ptkb({q: dict.fromkeys(k, 1.0) for q, k in gold.items()}, qrels, 1, topics)
    micro, _ = _sklearn(gold, qrels, 1)
    assert result.mean["F1_micro(rel=1)"] == pytest.approx(micro["F"])
    assert 0 < micro["F"] < 1


def test_bad_input() -> None:
    assert normalise_statement("  I Like  tea; ") == normalise_statement("I like tea")
    with pytest.raises(IkatError, match="every judged statement"):
        classify_ptkb({"1-1_1": {}}, {"1-1_1": {"1": 1}}, rel=0)
    with pytest.raises(IkatError, match="names conversation 2-1"):
        ptkb_qrels_keys({"1-1_1": {"ptkb-2-1-0": 1}})


def test_baseline_files_and_trec_input(released: Path, tmp_path: Path) -> None:
    """`classify-ptkb --cite all|none` and a TREC file of PTKB keys (what `ikatkit ptkb --k N` writes) through
    `eval-ptkb --classify`."""
    topics_file, qrels_file = released / "2025_test_topics.json", released / "qrels-ptkb-nist.trec"
    qrels = load_qrels(qrels_file)
    keyed = ptkb_qrels_keys(qrels)
    means = {}
    for cite in ("all", "none"):
        out = tmp_path / f"{cite}.json"
        assert main(["classify-ptkb", str(topics_file), "--cite", cite, "--out", str(out)]) == 0
        result = tmp_path / f"{cite}-result.json"
        assert main(["eval-ptkb", str(out), "--qrels", str(qrels_file), "--topics", str(topics_file), "--classify",
                     "--format", "json", "--out", str(result)]) == 0
        means[cite] = json.loads(result.read_text())["mean"]
    relevant = sum(grade >= 1 for judged in keyed.values() for grade in judged.values())
    assert means["all"]["P_micro(rel=1)"] == pytest.approx(relevant / sum(map(len, keyed.values())))
    assert set(means["none"].values()) == {0.0}
    # top-2 by hand as a TREC file: keys 1 and 2 of every judged turn
    trec = tmp_path / "top2.trec"
    trec.write_text("".join(f"{qid} Q0 {key} {rank} {3 - rank} top2\n" for qid in keyed
                            for rank, key in ((1, "1"), (2, "2"))))
    result = tmp_path / "top2-result.json"
    assert main(["eval-ptkb", str(trec), "--qrels", str(qrels_file), "--classify", "--format", "json",
                 "--out", str(result)]) == 0
    expected = classify_ptkb({qid: {"1": 2.0, "2": 1.0} for qid in keyed}, qrels, 1)
    assert json.loads(result.read_text())["mean"] == pytest.approx(expected.mean)


def _gold(topics_file: Path, path: Path, year: str) -> Path:
    """The run citing the topics' own PTKB provenance, written in ``year``'s official format."""
    from ikatkit.runs.io import write_run
    from runs_gold import gold_run

    run = gold_run(load_topics(topics_file))
    run.team_id = "t"
    write_run(run, path, year)
    return path


def _error(capsys, *args: str) -> str:
    assert main(list(args)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("classify", [[], ["--classify"]])
def test_an_interactive_run_is_not_scored_against_offline_ptkb_qrels(released: Path, capsys, classify) -> None:
    run = released / "interactive-runs" / "orga-llama8b-bm25-minilm-llama8b-v2.jsonl"
    line = _error(capsys, "eval-ptkb", str(run), "--qrels", str(released / "qrels-ptkb-nist.trec"), *classify)
    assert "is interactive: its turn ids are the simulated user's turns, not the offline turns" in line
    assert "fix: score an offline run" in line and "eval-responses RUN --rubrics" in line


@pytest.mark.parametrize("classify", [[], ["--classify"]])
def test_another_years_ptkb_qrels_are_recognised(released: Path, ikat2023: Path, tmp_path: Path, capsys,
                                                 classify) -> None:
    run2023 = _gold(ikat2023 / "test_topics.json", tmp_path / "run2023.json", "2023")
    line = _error(capsys, "eval-ptkb", str(run2023), "--qrels", str(released / "qrels-ptkb-nist.trec"), *classify)
    assert "these are 2025 PTKB qrels (statement ids such as 'ptkb-1-1-0') and the run is a 2023 run" in line
    assert "passage qrels" not in line and "ptkb_qrels.nist.txt" in line
    topics2025 = released / "2025_test_topics.json"
    run2025 = _gold(topics2025, tmp_path / "run2025.jsonl", "2025")
    line = _error(capsys, "eval-ptkb", str(run2025), "--topics", str(topics2025), "--qrels",
                  str(ikat2023 / "ptkb_qrels.nist.txt"), *classify)
    assert "these are 2023/2024 PTKB qrels" in line and "qrels-ptkb-nist.trec" in line


def test_a_2025_run_ranks_statements_against_the_2025_ptkb_qrels(released: Path, tmp_path: Path) -> None:
    """The released qrels' ptkb-<conversation>-<i> ids are keys for ranking measures too (as for --classify)."""
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.ptkb import evaluate_ptkb, ptkb_rankings
    from ikatkit.runs.io import read_run

    topics2025 = released / "2025_test_topics.json"
    run = read_run(_gold(topics2025, tmp_path / "run2025.jsonl", "2025"), topics=load_topics(topics2025))
    qrels = load_qrels(released / "qrels-ptkb-nist.trec")
    result = evaluate_ptkb(run, qrels, ["nDCG@5", "P(rel=1)@5"])
    # the same by ir-measures on qrels keyed by hand: ptkb-<conversation>-<i> -> str(i + 1)
    by_hand = {q: {k.rsplit("-", 1)[1]: g for k, g in judged.items()} for q, judged in qrels.items()}
    by_hand = {q: {str(int(k) + 1): g for k, g in judged.items()} for q, judged in by_hand.items()}
    expected = evaluate(ptkb_rankings(run), by_hand, ["nDCG@5", "P(rel=1)@5"])
    assert result.evaluated == expected.evaluated and len(result.evaluated) > 10
    assert result.mean == pytest.approx(expected.mean) and 0 < result.mean["nDCG@5"] < 1
