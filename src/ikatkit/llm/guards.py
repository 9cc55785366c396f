"""Checks on LLM outputs before a pipeline uses them: degenerate outputs are named, never used.

Small models (and large ones, sometimes) copy an earlier utterance instead of rewriting, keep the role tags
of the prompt's context (``User: ...``), echo the prompt's sections (``### User Question: ... ### Response:``),
repeat one sentence, or list the same query several times. Each check returns the reason an output is
rejected, or ``None`` when it may be used; the stage then falls back (raw utterance, top passage, the query)
and notes the reason on the record (the run's manifest counts the notes).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from ikatkit.llm.parse import output_lines

ROLE_TAG = re.compile(r"^\s*(user|system|assistant|human|bot)\s*:", re.I | re.M)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
MIN_REPEATED_WORDS = 3
# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, which Anserini's English analyzer (our BM25) drops: a rewrite of
# these words alone retrieves nothing.
LUCENE_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with".split())


@lru_cache(maxsize=1)
def _template_echo() -> re.Pattern[str]:
    """The input section labels of our prompts (``### User Question:``, ``### Passages:``, ...) as an output may
    repeat them, with or without the ``###``. The label a prompt ends on (``### Response:``) only introduces
    the output, and a response's own Markdown headings do not match."""
    from ikatkit.llm.prompts import TASKS, template

    label = re.compile(r"^###[ \t]*(.+?):[ \t]*$", re.M)
    texts = [template(task) for task in TASKS]
    finals = {m.group(1) for text in texts if (m := label.match(text.strip().splitlines()[-1]))}  # output's own
    labels = sorted({found for text in texts for found in label.findall(text)} - finals)
    return re.compile(r"^\s*(#+\s*)?(" + "|".join(map(re.escape, labels)) + r")s?\s*:", re.I | re.M)  # "Instructions:"


def normalize(text: str) -> str:
    """Lower case, words only: what two texts must share to count as the same."""
    return " ".join(re.findall(r"\w+", text.lower()))


def echoes_template(text: str) -> bool:
    """Section labels of our prompts in the output (``### Response:``, ``User Question:``)."""
    return bool(_template_echo().search(text))


def repeated_sentence(text: str) -> str | None:
    """A sentence of at least three words that the text says more than once (the first such), else None."""
    sentences = [normalize(s) for s in _SENTENCE.split(text)]
    counts = Counter(s for s in sentences if len(s.split()) >= MIN_REPEATED_WORDS)
    repeated = [s for s in sentences if counts[s] > 1]
    return repeated[0] if repeated else None


def check_rewrite(rewrite: str, utterance: str, history: Sequence[tuple[str, str]]) -> str | None:
    """Why the parsed ``rewrite`` must not be used, or None.

    Rejected: empty; role tags or prompt sections in the output; a copy of an earlier utterance of the
    conversation (unless the user repeated that utterance now); a statement where the user asked a question
    (the model answered instead of rewriting: "You need to eat 200g of protein every day."); and, unless the
    user said just that, a rewrite BM25 cannot search (stop words only: "No.") or one word said over and over
    ("No, no, no, no, ..."); a rewrite that adds nothing and leaves out most of the utterance's words (stop words
    aside: "It hurts after my long runs. What should I do?" -> "What should I do?"): it resolves nothing and loses
    what the user said."""
    if not rewrite.strip():
        return "empty rewrite"
    if ROLE_TAG.search(rewrite):
        return "rewrite carries role tags"
    if echoes_template(rewrite):
        return "rewrite echoes the prompt template"
    own, current = normalize(rewrite), normalize(utterance)
    if own != current and any(own == normalize(previous) for previous, _ in history):
        return "rewrite copies an earlier utterance"
    words = own.split()
    if own != current and not set(words) - LUCENE_STOP_WORDS:
        return "rewrite has only stop words"
    if own != current and len(words) >= MIN_REPEATED_WORDS and len(set(words)) == 1:
        return "rewrite repeats one word"
    if utterance.rstrip().endswith("?") and "?" not in rewrite and rewrite.rstrip().endswith((".", "!")):
        return "rewrite answers instead of asking"
    asked, kept = set(current.split()) - LUCENE_STOP_WORDS, set(words) - LUCENE_STOP_WORDS
    if kept < asked and len(kept) < len(asked) / 2:
        return "rewrite only cuts the utterance"
    return None


def looping_phrase(text: str, longest: int = 4, times: int = 4) -> str | None:
    """A phrase of up to ``longest`` words said ``times`` times or more in a row (the first such), else None:
    "- Microplastics - Microplastics - Microplastics - Microplastics", a loop no sentence split shows."""
    words = normalize(text).split()
    for size in range(1, longest + 1):
        for start in range(len(words) - size * times + 1):
            phrase = words[start: start + size]
            if all(words[start + k * size: start + (k + 1) * size] == phrase for k in range(1, times)):
                return " ".join(phrase)
    return None


def check_response(response: str) -> str | None:
    """Why a response (or a GtR initial answer) must not be used, or None: empty, the template, a loop (a sentence
    said twice, a short phrase four times in a row)."""
    if not response.strip():
        return "empty response"
    if echoes_template(response) or ROLE_TAG.search(response):
        return "response echoes the prompt template"
    if repeated_sentence(response):
        return "response repeats a sentence"
    if looping_phrase(response):
        return "response repeats a phrase"
    return None


def check_queries(queries: Sequence[str], output: str) -> str | None:
    """Why the queries parsed from ``output`` must not be used, or None: none parsed, role tags or the
    template in them, or several generated lines that are all one query."""
    if not queries:
        return "no generated query"
    if any(ROLE_TAG.search(q) or echoes_template(q) for q in queries):
        return "generated queries echo the prompt"
    lines = output_lines(output)
    if len(lines) > 1 and len({normalize(line) for line in lines}) == 1:
        return "generated queries are all duplicates"
    return None
