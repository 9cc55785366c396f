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
