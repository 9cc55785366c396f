"""Rewrite quality against the topics' resolved utterances: ROUGE-L F1 and exact match, with the scorers of
``ikatkit eval-responses`` (rouge-score, stemmed; its tokenizer), so both commands give one ROUGE-L."""

from __future__ import annotations


from ikatkit.capabilities import ChatLLM
from ikatkit.evaluate.responses.scorers import rouge, tokenize
from ikatkit.llm.parse import parse_rewrite
from ikatkit.topics import Topics


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 of ``candidate`` against ``reference``, as the ``ROUGE-L`` response measure computes it."""
    return rouge([candidate], [reference], types=("rougeL",))["rougeL_f"][0]


def evaluate_rewrites(llm: ChatLLM, topics: Topics) -> dict[str, float]:
    """Rewrite every turn with ``llm`` (the RtG prompt) and score against the resolved utterances."""
    from ikatkit.finetune.data import rewrite_examples

    examples = rewrite_examples(topics)
    outputs = llm.chat([e.messages for e in examples])
    rewrites = [parse_rewrite(o) or topics.turn(e.qid).utterance for e, o in zip(examples, outputs)]
    targets = [e.target for e in examples]
    scores = rouge(rewrites, targets, types=("rougeL",))["rougeL_f"]
    exact = [tokenize(r) == tokenize(t) for r, t in zip(rewrites, targets)]
    return {"turns": len(examples), "rouge_l": sum(scores) / len(scores), "exact_match": sum(exact) / len(exact)}
