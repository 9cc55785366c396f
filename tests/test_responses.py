"""Response scorers against the reference packages called directly (rouge-score, bert-score,
sentence-transformers) on real iKAT 2023 responses and provenance passages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ikatkit.evaluate.responses import (BertScore, Embedder, citation_coverage, k_precision, rouge,
                                        rouge_l_grounding, token_recall, tokenize)
from ikatkit.models import resolve_model
from ikatkit.topics import load_topics


@pytest.fixture(scope="session")
def pairs_2023(ikat2023):
    """24 real test turns: (canonical response, its first provenance passage's text, all provenance texts)."""
    texts = {}
    for line in (ikat2023 / "test_provenance_passages.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        texts.setdefault(f"{record['doc_id']}:{record['passage_id']}", record["passage_text"])
    turns = [t for t in load_topics(ikat2023 / "test_topics.json")
             if t.response and t.response_provenance and t.response_provenance[0] in texts][:24]
    assert len(turns) == 24
    return ([t.response for t in turns], [texts[t.response_provenance[0]] for t in turns],
            [[texts[p] for p in t.response_provenance if p in texts] for t in turns])


@pytest.fixture(scope="session")
def bertscore():
    return BertScore()


@pytest.fixture(scope="session")
def embedder():
    return Embedder()


def test_rouge_equals_rouge_score(pairs_2023):
    from rouge_score import rouge_scorer

    canonical, passage, _ = pairs_2023
    ours = rouge(passage, canonical)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    for i, (response, reference) in enumerate(zip(passage, canonical)):
        direct = scorer.score(reference, response)
        for kind in ("rouge1", "rouge2", "rougeL"):
            assert ours[f"{kind}_f"][i] == direct[kind].fmeasure
            assert ours[f"{kind}_r"][i] == direct[kind].recall
            assert ours[f"{kind}_p"][i] == direct[kind].precision
    itself = rouge(canonical, canonical)
    assert itself["rougeL_f"] == [1.0] * 24 and itself["rouge2_r"] == [1.0] * 24
    assert 0 < np.mean(ours["rougeL_f"]) < 0.5  # a whole passage is a poor copy of a short answer
    joined = [" ".join(texts) for texts in pairs_2023[2][:4]]
    assert rouge_l_grounding(canonical[:4], pairs_2023[2][:4]) == [scorer.score(j, c)["rougeL"].precision
                                                                   for c, j in zip(canonical, joined)]


def test_token_measures_count_multisets():
    # reference tokens [the, cat, the, dog]; response [the, cat, sat, on, the, mat]: the x2 + cat = 3 of 4
    assert tokenize("The cat, the dog.") == ["the", "cat", "the", "dog"]
    assert token_recall(["The cat sat on the mat"], ["The cat, the dog."]) == [0.75]
    # knowledge [the, cat, a, mat]: the x1, cat, mat = 3 of the response's 6 tokens
    assert k_precision(["The cat sat on the mat"], [["the cat", "a mat"]]) == [0.5]
    assert k_precision([""], [["x"]]) == [0.0] and token_recall(["x"], [""]) == [0.0]
    assert k_precision(["a b"], [[]]) == [0.0]


def test_token_measures_on_real_responses(pairs_2023):
    canonical, passage, provenance = pairs_2023
    assert token_recall(canonical, canonical) == [1.0] * 24
    # canonical responses are written from their provenance: most of their tokens are in it
    grounded = k_precision(canonical, provenance)
    assert 0.6 < np.mean(grounded) < 1.0
    assert np.mean(k_precision(canonical, [[p] for p in reversed(passage)])) < np.mean(grounded) - 0.2


def test_bertscore_equals_bert_score_package(pairs_2023, bertscore):
    import bert_score

    canonical, passage, provenance = pairs_2023
    assert bertscore.label == "all-MiniLM-L6-v2:L6" and bertscore.layer == 6
    items = [i for i in range(24) if len(provenance[i]) > 1][:3]
    # one direct call of the package (it loads the model on every call): 8 pairs, then each (response, passage)
    candidates = passage[:8] + [canonical[i] for i in items for _ in provenance[i]]
    references = canonical[:8] + [text for i in items for text in provenance[i]]
    p, r, f = bert_score.score(candidates, references, model_type=resolve_model("bundled:minilm"), num_layers=6,
                               device="cpu")
    ours = bertscore.score(passage[:8], canonical[:8])
    np.testing.assert_allclose(ours["precision"], p[:8].numpy(), atol=1e-5)
    np.testing.assert_allclose(ours["recall"], r[:8].numpy(), atol=1e-5)
    np.testing.assert_allclose(ours["f1"], f[:8].numpy(), atol=1e-5)
    # against passages: the best passage's precision
    best = bertscore.k_precision([canonical[i] for i in items], [provenance[i] for i in items])
    start = 8
    for i, value in zip(items, best):
        assert value == pytest.approx(float(p[start:start + len(provenance[i])].max()), abs=1e-6)
        start += len(provenance[i])
    assert np.allclose(bertscore.score(canonical[:3], canonical[:3])["f1"], 1.0, atol=1e-5)
    assert bertscore.score(["", "x"], ["y", " "]) == {"precision": [0.0, 0.0], "recall": [0.0, 0.0],
                                                     "f1": [0.0, 0.0]}
    assert bertscore.k_precision(["a"], [[]]) == [0.0]


def test_embedding_similarity_and_citation_coverage(pairs_2023, embedder):
    from sentence_transformers import SentenceTransformer

    canonical, passage, provenance = pairs_2023
    model = SentenceTransformer(resolve_model("bundled:minilm"), device="cpu")
    a = model.encode(canonical[:5], normalize_embeddings=True)
    b = model.encode(passage[:5], normalize_embeddings=True)
    np.testing.assert_allclose(embedder.similarity(canonical[:5], passage[:5]), (a * b).sum(axis=1), atol=1e-5)
    assert embedder.similarity(["", "x"], ["x", ""]) == [0.0, 0.0]
    # coverage: sentences whose best passage reaches the threshold; threshold -1 covers every sentence
    response = "Olive oil is central to the Mediterranean diet. My phone runs Android 14."
    passages = ["The Mediterranean diet is built on olive oil, vegetables and fish."]
    sims = model.encode(["Olive oil is central to the Mediterranean diet.", "My phone runs Android 14.",
                         passages[0]], normalize_embeddings=True)
    first, second = float(sims[0] @ sims[2]), float(sims[1] @ sims[2])
    assert second < 0.3 < first
    assert citation_coverage(embedder, [response], [passages], 0.3) == [0.5]
    assert citation_coverage(embedder, [response], [passages], -1.0) == [1.0]
    assert citation_coverage(embedder, [response, ""], [[], passages], 0.3) == [0.0, 0.0]
    assert np.mean(citation_coverage(embedder, canonical[:6], provenance[:6], 0.5)) > 0.5


# ---------------------------------------------------------------- nuggets, readers, evaluation, CLI, compare

def test_nugget_scores_follow_autonuggetizer():
    from ikatkit.evaluate.responses.data import Nugget
    from ikatkit.evaluate.responses.nuggets import nugget_scores

    nuggets = [Nugget(str(i), f"n{i}", g) for i, g in enumerate((4, 3, 2, 1))]
    scores = nugget_scores(nuggets, [1.0, 0.5, 0.0, 1.0])
    assert scores == pytest.approx({"all": 2.5 / 4, "strict_all": 0.5, "vital": 0.75, "strict_vital": 0.5,
                                    "weighted": 2 / 3, "graded": 6.5 / 10})
    assert "vital" not in nugget_scores(nuggets[2:], [1.0, 0.0]) and nugget_scores([], []) == {}


def test_readers_of_the_2024_release(nuggets_2024, tmp_path):
    from ikatkit.errors import IkatError
    from ikatkit.evaluate.responses.data import read_nuggets, read_references, read_response_runs

    nuggets = read_nuggets(nuggets_2024 / "gold_nuggets_human.json")
    assert len(nuggets) == 68 and sum(map(len, nuggets.values())) == 902 and nuggets["4_7"] == []
    assert sorted(n.grade for group in nuggets.values() for n in group).count(4) == 35
    automatic = read_response_runs(nuggets_2024 / "automatic_responses.json")
    assert len(automatic) == 19 and all(len(r.responses) == 36 for r in automatic)
    assert len(read_response_runs(nuggets_2024 / "manual_responses.json")) == 4
    gold = read_response_runs(nuggets_2024 / "gold_responses_human.json")
    assert [r.name for r in gold] == ["manual"] and sum(not t.strip() for t in gold[0].responses.values()) == 6
    assert read_references(nuggets_2024 / "gold_responses_human.json") == gold[0].responses
    for content, match in (("[1, 2]", "non-empty JSON object"), ('{"0_1": [1]}', "key '0_1'"),
                           ('{"0_1": {"[1]": {"text": "a", "relevance": "high"}}}', "relevance 'high'"),
                           ('{"0_1": {"[1]": {"relevance": "2"}}}', "needs a 'text'"), ("{", "invalid JSON")):
        bad = tmp_path / "bad.json"
        bad.write_text(content)
        with pytest.raises(IkatError, match=match):
            read_nuggets(bad)


def test_atomic_nuggets_of_the_gold_responses(nuggets_2024, tmp_path):
    """The gold-response file as a nugget source: each turn's matched and not-matched lists, ungraded."""
    from ikatkit.errors import IkatError
    from ikatkit.evaluate.responses.data import read_nuggets

    raw = json.loads((nuggets_2024 / "gold_responses_human.json").read_text())
    nuggets = read_nuggets(nuggets_2024 / "gold_responses_human.json")
    assert sorted(nuggets) == sorted(raw) and len(nuggets) == 36
    listed = {q: v["manual"]["nuggets"]["matched"] + v["manual"]["nuggets"]["not-matched"] for q, v in raw.items()}
    assert {q: [n.text for n in group] for q, group in nuggets.items()} == {
        q: list(dict.fromkeys(t.strip() for t in texts)) for q, texts in listed.items()}
    assert sum(map(len, nuggets.values())) == 101 and sum(not group for group in nuggets.values()) == 9
    assert {n.grade for group in nuggets.values() for n in group} == {0}
    bad = tmp_path / "bad.json"
    bad.write_text('{"0_1": {"manual": {"response": "x", "nuggets": {"matched": "one"}}}}')
    with pytest.raises(IkatError, match="key '0_1' -> 'manual'"):
        read_nuggets(bad)


def test_nugget_recall_with_embedding_matcher(nuggets_2024, embedder):
    from sentence_transformers import SentenceTransformer

    from ikatkit.evaluate.responses.data import read_nuggets, read_response_runs
    from ikatkit.evaluate.responses.evaluate import ResponseScorers, evaluate_response_runs
    from ikatkit.evaluate.responses.nuggets import DEFAULT_THRESHOLD, windows

    turns = ["0_2", "0_11", "4_7"]
    gold = read_response_runs(nuggets_2024 / "gold_responses_human.json")[0]
    gold.responses = {q: gold.responses[q] for q in turns}
    scorers = ResponseScorers()
    scorers._embedder = embedder
    result = evaluate_response_runs([gold], nuggets=nuggets_2024 / "gold_nuggets_human.json",
                                    measures=["NuggetRecall", "VitalRecall", "Words"], scorers=scorers)["manual"]
    assert result.info["turns_without_nuggets"] == ["4_7"] and "NuggetRecall" not in result.per_query["4_7"]
    # the recall of 0_2 computed directly: the sentence-transformers cosine of each nugget and response window
    model = SentenceTransformer(resolve_model("bundled:minilm"), device="cpu")
    nuggets = read_nuggets(nuggets_2024 / "gold_nuggets_human.json")["0_2"]
    a = model.encode([n.text for n in nuggets], normalize_embeddings=True)
    b = model.encode(windows(gold.responses["0_2"]), normalize_embeddings=True)
    expected = float(np.mean((a @ b.T).max(axis=1) >= DEFAULT_THRESHOLD))
    assert result.per_query["0_2"]["NuggetRecall"] == pytest.approx(expected)
    assert result.mean["Words"] == pytest.approx(np.mean([len(gold.responses[q].split()) for q in turns]))


def test_llm_matcher_labels_pairs_with_smollm2(tmp_path):
    from ikatkit.evaluate.responses.data import Nugget
    from ikatkit.evaluate.responses.nuggets import LlmMatcher
    from ikatkit.llm import make_llm
    from ikatkit.llm.parse import parse_support

    assert [parse_support(t) for t in ("support", "Partial_support.", "not_support", "No.", "maybe")] == \
        [1.0, 0.5, 0.0, 0.0, None]
    llm = make_llm({"backend": "transformers", "model": "bundled:smollm2", "cache_dir": str(tmp_path)})
    matcher = LlmMatcher(llm)
    nuggets = [[Nugget("1", "The Eiffel Tower is in Paris.", 4)], []]
    support = matcher.support(["The Eiffel Tower stands in Paris, France.", ""], nuggets, ["Where is it?", "x"])
    assert len(support[0]) == 1 and support[1] == [] and support[0][0] in (0.0, 0.5, 1.0)
    assert llm.stats["misses"] == 1
    assert matcher.support(["The Eiffel Tower stands in Paris, France."], nuggets[:1], ["Where is it?"]) == support[:1]
    assert llm.stats["hits"] == 1
    assert matcher.label == "LLM transformers:bundled:smollm2"


def _official_run(topics, texts, path):
    from ikatkit.runs.io import write_run
    from ikatkit.runs.model import PassageRef, Response, Run, TurnResult

    turns = [TurnResult(t.qid, [Response(1, t.response, [PassageRef(p, 1.0 - i / 10, used=True)
                                                        for i, p in enumerate(t.response_provenance)])])
             for t in topics if t.response_provenance and all(p in texts for p in t.response_provenance)]
    write_run(Run("canonical", "manual", turns), path, "2023")
    return turns


def test_eval_responses_command(ikat2023, passages_jsonl, tmp_path, capsys):
    from ikatkit.cli import main
    from ikatkit.collection.readers import passage_texts

    topics = load_topics(ikat2023 / "test_topics.json").subset(["9-1"])
    texts = passage_texts([passages_jsonl])
    turns = _official_run(topics, texts, tmp_path / "run.json")
    topics_file = tmp_path / "topics.json"
    data = [c for c in json.loads((ikat2023 / "test_topics.json").read_text()) if c["number"] == "9-1"]
    topics_file.write_text(json.dumps(data))
    out = tmp_path / "eval.json"
    assert main(["eval-responses", str(tmp_path / "run.json"), "--topics", str(topics_file), "--passages",
                 str(passages_jsonl), "--measures", "ROUGE-L", "Recall", "K-Precision", "Empty", "--per-query",
                 "--format", "json", "--out", str(out)]) == 0
    result = json.loads(out.read_text())["canonical"]
    assert result["evaluated"] == len(turns) and result["mean"]["ROUGE-L"] == 1.0 and result["mean"]["Empty"] == 0
    expected = k_precision([t.responses[0].text for t in turns],
                           [[texts[p.id] for p in t.responses[0].passages] for t in turns])
    assert [result["per_query"][t.turn_id]["K-Precision"] for t in turns] == expected
    # turns the topics lack (here 2 of 10-1's beside 9-1's): skipped and counted; a run most of whose turns the
    # topics lack is another year's or conversation's (refused: tests/test_eval_figures.py); an unknown measure: one
    # clear error
    from dataclasses import replace

    from ikatkit.runs.io import read_run, write_run

    other = tmp_path / "other.json"
    _official_run(load_topics(ikat2023 / "test_topics.json").subset(["9-1", "10-1"]), texts, other)
    run = read_run(other)
    kept = [t for t in run.turns if t.turn_id.startswith("9-1_")] + [t for t in run.turns
                                                                       if t.turn_id.startswith("10-1_")][:2]
    write_run(replace(run, turns=kept), other, "2023")
    assert main(["eval-responses", f"x={other}", "--topics", str(topics_file), "--measures", "Words"]) == 0
    err = capsys.readouterr().err
    assert f"x: {len(turns)} turns evaluated" in err and "turns of run x are not in the topics, skipped" in err
    assert main(["eval-responses", str(other), "--topics", str(topics_file), "--measures", "ROUGE-9"]) == 2
    assert "unknown response measure 'ROUGE-9'" in capsys.readouterr().err
    assert main(["eval-responses", str(other), "--measures", "K-Precision", "--topics", str(topics_file)]) == 2
    assert "K-Precision needs passages" in capsys.readouterr().err
    assert main(["eval-responses", str(other), "--topics", str(topics_file), "--passages", str(tmp_path / "no")]) == 2
    assert "passages file not found" in capsys.readouterr().err


def test_compare_and_report_take_response_measures(nuggets_2024, tmp_path, capsys):
    from ikatkit.cli import main
    from ikatkit.evaluate.compare import compare_responses
    from ikatkit.evaluate.responses.data import ResponseRun, read_response_runs

    runs = read_response_runs(nuggets_2024 / "manual_responses.json")[:2]
    gold = read_response_runs(nuggets_2024 / "gold_responses_human.json")[0]
    runs = [ResponseRun(r.name, {q: r.responses[q] for q in list(r.responses)[:8]}) for r in runs]
    comparison = compare_responses(runs, references=gold.responses, measures=["ROUGE-L", "Words"])
    rows = {(r["run"], r["measure"]): r for r in comparison.rows}
    a, b = (runs[0].name, "ROUGE-L"), (runs[1].name, "ROUGE-L")
    assert rows[b]["turns"] == sum(bool(gold.responses[q].strip()) for q in list(runs[0].responses))
    assert rows[b]["delta"] == pytest.approx(rows[b]["mean"] - rows[a]["mean"])
    assert 0 <= rows[b]["p"] <= 1 and "judged@" not in comparison.to_markdown()
    reference = tmp_path / "ref.json"
    reference.write_text(json.dumps(gold.responses))
    assert main(["report", str(nuggets_2024 / "manual_responses.json"), "--references", str(reference),
                 "--measures", "ROUGE-L", "Words", "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Responses</h2>" in page and "Responses: ROUGE-L per turn position" in page  # captions in words
