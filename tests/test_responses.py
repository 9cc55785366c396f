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
    np.testing.assert_allclose(ours["precision"], p[:8].numpy(), atol=1e-6)
    np.testing.assert_allclose(ours["recall"], r[:8].numpy(), atol=1e-6)
    np.testing.assert_allclose(ours["f1"], f[:8].numpy(), atol=1e-6)
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
