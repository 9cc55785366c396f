"""Fine-tuning: supervised data from the real training topics and a real LoRA training of SmolLM2 on CPU."""

from __future__ import annotations

import json

import pytest

from ikatkit.collection.readers import passage_texts
from ikatkit.finetune.data import response_examples, rewrite_examples
from ikatkit.finetune.rewrite_eval import rouge_l
from ikatkit.finetune.train import TrainSettings, train_lora
from ikatkit.topics import load_topics


def test_examples_from_real_training_topics(ikat2023):
    topics = load_topics(ikat2023 / "train_topics.json")
    rewrites = rewrite_examples(topics)
    assert len(rewrites) == 95
    assert rewrites[1].messages[0]["content"].endswith("### Rewritten User Question:")
    assert rewrites[1].target == topics.turn(rewrites[1].qid).resolved_utterance
    passages = passage_texts([ikat2023 / "train_provenance_passages.jsonl"])
    responses = response_examples(topics, passages)
    with_provenance = [t for t in topics if t.response and t.response_provenance
                       and all(p in passages for p in t.response_provenance)]
    assert len(responses) == len(with_provenance) == 76
    first = topics.turn(responses[0].qid).response_provenance[0]
    assert " ".join(passages[first].split()[:10]) in responses[0].messages[0]["content"]


def test_rouge_l():
    assert rouge_l("the cat sat on the mat", "the cat sat on the mat") == 1.0
    assert rouge_l("the cat", "a dog") == 0.0
    assert rouge_l("cat sat mat", "the cat sat on the mat") == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert rouge_l("cats sat", "the cat sat") == pytest.approx(2 * 1.0 * (2 / 3) / (1 + 2 / 3))  # stemmed: cats = cat


def test_finetune_eval_and_eval_responses_agree_on_rouge_l(ikat2023):
    """On the real (utterance, resolved utterance) pairs of the 2023 training topics, `finetune eval`'s ROUGE-L is
    `eval-responses`' ROUGE-L measure, and both are rouge-score's (stemmed)."""
    from rouge_score import rouge_scorer

    from ikatkit.evaluate.responses.data import ResponseRun
    from ikatkit.evaluate.responses.evaluate import evaluate_response_runs

    topics = load_topics(ikat2023 / "train_topics.json")
    pairs = {t.qid: (t.utterance, t.resolved_utterance) for t in topics if t.resolved_utterance}
    result = evaluate_response_runs([ResponseRun("raw", {q: u for q, (u, _) in pairs.items()})],
                                    references={q: r for q, (_, r) in pairs.items()}, measures=["ROUGE-L"])["raw"]
    reference = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    assert len(pairs) == 95 and sum(rouge_l(u, r) < 1 for u, r in pairs.values()) > 50
    for qid, (utterance, resolved) in pairs.items():
        assert rouge_l(utterance, resolved) == pytest.approx(result.per_query[qid]["ROUGE-L"], abs=1e-12)
        assert rouge_l(utterance, resolved) == pytest.approx(reference.score(resolved, utterance)["rougeL"].fmeasure)


def test_passage_texts_read_by_the_collection_readers(tmp_path):
    from ikatkit.errors import IkatError

    good = tmp_path / "p.jsonl"
    good.write_text('{"doc_id": "d", "passage_id": "1", "passage_text": "one"}\n'
                    '{"doc_id": "d", "passage_id": 2, "passage_text": "two"}\n')
    assert passage_texts([good]) == {"d:1": "one", "d:2": "two"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "contents": "x"}\n{"id": "b"}\n')
    with pytest.raises(IkatError) as err:
        passage_texts([bad])
    assert err.value.path == bad and "line 2" in str(err.value) and err.value.fix


def test_lora_training_lowers_loss_and_changes_generations(ikat2023, tmp_path):
    from ikatkit.llm import make_llm

    examples = rewrite_examples(load_topics(ikat2023 / "train_topics.json"))[:2]
    settings = TrainSettings(steps=4, batch_size=2, micro_batch=2, lr=2e-3, r=8, alpha=16, max_length=128)
    manifest = train_lora(examples, tmp_path / "adapter", settings)
    assert manifest["losses"][-1] < manifest["losses"][0]
    assert json.loads((tmp_path / "adapter" / "training.json").read_text())["examples"] == 2
    base = make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 8})
    tuned = make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 8,
                      "adapter": str(tmp_path / "adapter")})
    assert tuned.chat([examples[0].messages]) != base.chat([examples[0].messages])
