"""Supervised examples from training topics, rendered with the same prompt files the pipelines use."""

from __future__ import annotations

from dataclasses import dataclass

from ikatkit.llm.prompts import render
from ikatkit.topics import Topics


@dataclass(frozen=True)
class Example:
    qid: str
    task: str
    messages: list[dict[str, str]]
    target: str


def rewrite_examples(topics: Topics) -> list[Example]:
    """Context + utterance -> resolved utterance, for every turn with a resolved utterance."""
    examples = []
    for turn in topics:
        if turn.resolved_utterance:
            history = [(t.utterance, t.response or "") for t in topics.conversation_of(turn.qid).history(turn.turn_id)]
            examples.append(Example(turn.qid, "rewrite", render("rtg_rewrite", history=history,
                                                                utterance=turn.utterance),
                                    turn.resolved_utterance))
    return examples


def response_examples(topics: Topics, passages: dict[str, str]) -> list[Example]:
    """Rewrite + gold PTKB + provenance passages -> canonical response, where every provenance passage is known."""
    examples = []
    for turn in topics:
        cited = turn.response_provenance
        if not turn.response or not cited or any(pid not in passages for pid in cited):
            continue
        ptkb = topics.conversation_of(turn.qid).ptkb
        messages = render("rtg_response", utterance=turn.utterance, query=turn.resolved_utterance or turn.utterance,
                          ptkb=[ptkb[k] for k in turn.ptkb_provenance], passages=[passages[p] for p in cited])
        examples.append(Example(turn.qid, "response", messages, turn.response))
    return examples
