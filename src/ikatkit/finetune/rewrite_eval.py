"""Rewrite quality against the topics' resolved utterances: ROUGE-L F1 (word LCS) and exact match."""

from __future__ import annotations

import re

from ikatkit.llm.parse import parse_rewrite
from ikatkit.topics import Topics

_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 over lower-cased word tokens."""
    a, b = _words(candidate), _words(reference)
    if not a or not b:
        return 0.0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    lcs = previous[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(a), lcs / len(b)
    return 2 * precision * recall / (precision + recall)


def evaluate_rewrites(llm, topics: Topics) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Rewrite every turn with ``llm`` (the RtG prompt) and score against the resolved utterances."""
    from ikatkit.finetune.data import rewrite_examples

    examples = rewrite_examples(topics)
    outputs = llm.chat([e.messages for e in examples])
    rewrites = [parse_rewrite(o) or topics.turn(e.qid).utterance for e, o in zip(examples, outputs)]
    scores = [rouge_l(r, e.target) for r, e in zip(rewrites, examples)]
    exact = [" ".join(_words(r)) == " ".join(_words(e.target)) for r, e in zip(rewrites, examples)]
    return {"turns": len(examples), "rouge_l": sum(scores) / len(scores), "exact_match": sum(exact) / len(exact)}
