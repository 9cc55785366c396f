"""Prompt templates, one file per task in ``prompts/``, filled from a turn's context."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from importlib.resources import files
from typing import Any

from ikatkit.errors import IkatError

DIALOGUE_TASKS = ("nist_mixed_initiative", "nist_personalization", "nist_information_flow", "nist_trustworthiness",
                  "nist_satisfaction", "nist_engagement", "nist_relevance", "nist_subtopic_quality")  # eval-dialogues
TASKS = ("rtg_rewrite", "rtg_rewrite_chat", "rtg_response", "rtg_response_chat", "gtr_answer", "gtr_queries",
         "gtr_response", "ptkb_classify", "nugget_support",
         "promise_response", "refine_specificity", "refine_faithfulness", "refine_relevance", "refine_memory",
         "plan_sources", "persona_statements", "rubric_score", *DIALOGUE_TASKS)
MAX_PASSAGE_WORDS = 200
# Where a reply ends: on a new line, the model starting another turn or another prompt section (SmolLM2-135M
# goes on with "### User Question: ..." or "User: ..."). A reply may open with a label or an introduction
# line, so neither "###" at its start nor "\n" alone stops it.
STOPS: dict[str, tuple[str, ...]] = {task: ("\n###", "\nUser:", "\nSystem:") for task in TASKS}
STOPS["rtg_rewrite_chat"] = ("\n",)  # its few-shot answers are one line each
# A template is one user message, or a chat: lines "<<system>>", "<<user>>", "<<assistant>>" open its messages
# (the few-shot turns of rtg_rewrite_chat).
ROLE_LINE = re.compile(r"^<<(system|user|assistant)>>\n", re.M)


@lru_cache(maxsize=None)
def template(task: str) -> str:
    if task not in TASKS:
        raise IkatError(f"unknown prompt task {task!r}", fix=f"use one of {TASKS}")
    return (files("ikatkit.llm") / "prompts" / f"{task}.txt").read_text(encoding="utf-8").strip()


def format_context(history: Sequence[tuple[str, str]]) -> str:
    """All previous user utterances, then the last canonical response (the seed paper's context)."""
    if not history:
        return "(none: this is the first turn)"
    lines = [f"User: {utterance}" for utterance, _ in history]
    if history[-1][1]:
        lines.append(f"System: {history[-1][1]}")
    return "\n".join(lines)


def render(task: str, *, history: Sequence[tuple[str, str]] = (), utterance: str = "", query: str = "",
           ptkb: Sequence[str] = (), all_ptkb: Sequence[tuple[str, str]] = (), passages: Sequence[str] = (),
           answer: str = "", n: int = 5, response: str = "", nugget: str = "", **_: Any) -> list[dict[str, str]]:
    """The chat messages of ``task`` for one turn."""
    values = dict(
        context=format_context(history), utterance=utterance, query=query or utterance,
        ptkb="\n".join(f"- {s}" for s in ptkb) or "(none)",
        passages="\n\n".join(f"[{i}] {' '.join(p.split()[:MAX_PASSAGE_WORDS])}" for i, p in enumerate(passages, 1))
        or "(none)",
        statements="\n".join(f"{key}. {text}" for key, text in all_ptkb) or "(none)",
        answer=answer, n=n, response=response, nugget=nugget)
    parts = ROLE_LINE.split(template(task))
    if len(parts) == 1:
        return [{"role": "user", "content": parts[0].format(**values)}]
    return [{"role": role, "content": text.strip().format(**values)} for role, text in zip(parts[1::2], parts[2::2])]
