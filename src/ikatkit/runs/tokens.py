"""The simulation API's response limit: tokens as spaCy's blank English tokenizer counts them.

The organizers' server refuses (HTTP 422) a response whose ``len(spacy.blank("en")(text))`` exceeds the limit
(250, the ``max_tokens`` of the ``2025-interactive`` template); :func:`fit_response` cuts a response to the limit
at a sentence boundary, counting the same way.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ikatkit.runs.templates import load_template

INTERACTIVE = load_template("2025-interactive")
MAX_TOKENS = INTERACTIVE.limit("max_tokens", "responses[].text")
MAX_CITATIONS = INTERACTIVE.limit("max_items", "responses[].citations")


@lru_cache(maxsize=1)
def _nlp() -> Any:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")  # rule-based: the tokenizer's tokens stay the same
    return nlp


def count_tokens(text: str) -> int:
    """The number of tokens the server counts in ``text``."""
    return len(_nlp().tokenizer(text))


def fit_response(text: str, limit: int = MAX_TOKENS) -> tuple[str, bool]:
    """``text`` within ``limit`` tokens: whole sentences from the start while they fit (a first sentence longer
    than the limit is cut at a token), and whether anything was cut."""
    if count_tokens(text) <= limit:
        return text, False
    doc = _nlp()(text)
    end = 0
    for sentence in doc.sents:
        if sentence.end > limit:
            break
        end = sentence.end_char
    kept = text[:end].rstrip() if end else doc[:limit].text
    while count_tokens(kept) > limit:  # re-tokenising a cut text may split differently: drop tokens until it fits
        kept = _nlp().tokenizer(kept)[: count_tokens(kept) - 1].text
    return kept, True
