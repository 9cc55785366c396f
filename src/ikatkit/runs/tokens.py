"""The simulation API's limits by edition, and its response limit: tokens as spaCy's blank English tokenizer
counts them.

The organizers' server refuses (HTTP 422) a response whose ``len(spacy.blank("en")(text))`` exceeds the limit
(250, the ``max_tokens`` of the ``2025-interactive`` and ``2026-interactive`` templates); :func:`fit_response` cuts
a response to the limit at a sentence boundary, counting the same way. :func:`interactive_rules` gives an edition's
limits (2025: 1000 citations; 2026: the top 10, all assessed) from its template.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ikatkit.runs.templates import load_template

INTERACTIVE = load_template("2025-interactive")
MAX_TOKENS = INTERACTIVE.limit("max_tokens", "responses[].text")
MAX_CITATIONS = INTERACTIVE.limit("max_items", "responses[].citations")
EDITIONS = (2025, 2026)


@dataclass(frozen=True)
class InteractiveRules:
    """One edition's interactive limits: the template's name, response tokens and citations per turn."""

    edition: int
    template: str
    max_tokens: int
    max_citations: int


def interactive_rules(edition: int | str) -> InteractiveRules:
    """The limits of the interactive task of ``edition`` (2025 or 2026), read from its template."""
    if str(edition) not in {str(e) for e in EDITIONS}:
        from ikatkit.errors import IkatError

        raise IkatError(f"no interactive rules for {edition!r}", where="--rules", fix="use 2025 or 2026")
    template = load_template(f"{edition}-interactive")
    return InteractiveRules(int(edition), template.name, template.limit("max_tokens", "responses[].text"),
                            template.limit("max_items", "responses[].citations"))


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
