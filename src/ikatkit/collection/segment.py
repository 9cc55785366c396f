"""The official iKAT segmentation of a ClueWeb22 document into passages.

Clean-Text with newlines turned to spaces, stripped, first 10,000 characters; sentences split; windows of
10 sentences with a stride of 5, stopping once a window reaches the last sentence; passage ids
``<ClueWeb22-ID>:<i>`` from 0. The official collection was split with spaCy ``en_core_web_sm``'s sentence
recognizer: passage ids and texts match the official ones only with that splitter. Without it (the
default here, since the model is not on PyPI) a rule-based splitter is used. Index builds run that splitter
in Java (``ikatkit/index/IkatClueWeb22Collection.java``); a change here must be made there too (the tests
compare the two).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from itertools import accumulate
from typing import Any

from ikatkit.errors import IkatError

MAX_CHARS = 10_000
WINDOW = 10
STRIDE = 5

Splitter = Callable[[str], list[str]]

# A boundary is the white space after ., ! or ? (and at most one closing quote or bracket) when an upper-case
# letter or digit follows (after any opening quotes or brackets). The boundaries are found in a copy with ! and ?
# made full stops, by a pattern starting with the literal "." (which the engine skips to fastest); the split
# pieces' lengths then give the sentences' places in the text itself.
_BOUNDARY = re.compile(r"(\.[\"')\]]?)(\s+)(?=[\"'(\[]*[A-Z0-9])")


def rule_splitter(text: str) -> list[str]:
    """Split after ., ! or ? followed by white space and an upper-case letter or digit."""
    text = text.strip()
    if not text:
        return []
    # [sentence, punctuation, space, sentence, ..., sentence] -> where each piece ends
    ends = list(accumulate(map(len, _BOUNDARY.split(text.replace("!", ".").replace("?", ".")))))
    return [text[start:end] for start, end in zip([0, *ends[2::3]], [*ends[1::3], len(text)])]


@lru_cache(maxsize=1)
def _spacy_model() -> Any:  # a spacy Language; spaCy is imported only here
    import spacy

    nlp = spacy.load("en_core_web_sm", exclude=["parser", "tagger", "ner", "attribute_ruler", "lemmatizer", "tok2vec"])
    nlp.enable_pipe("senter")
    nlp.max_length = 1_500_000_000
    return nlp


def spacy_splitter(text: str) -> list[str]:
    """en_core_web_sm's sentence recognizer, as the official collection used."""
    return [str(s) for s in _spacy_model()(text).sents]


SPLITTERS = ("auto", "spacy", "rule")


def resolve_splitter(name: str = "auto") -> str:
    """The splitter ``name`` stands for: ``rule``; ``spacy`` (an error naming the fix when spaCy or its
    en_core_web_sm model is missing); ``auto``: ``spacy`` when both load, else ``rule``."""
    if name not in SPLITTERS:
        raise IkatError(f"unknown splitter {name!r}", fix=f"use one of {list(SPLITTERS)}")
    if name == "rule":
        return "rule"
    from importlib.util import find_spec

    if name == "auto" and find_spec("en_core_web_sm") is None:  # spaCy alone (the interactive extra) is no model
        return "rule"  # and importing spaCy only to find that out costs seconds
    try:
        _spacy_model()
    except (ImportError, OSError):
        if name == "spacy":
            raise IkatError("--splitter spacy needs spaCy and its en_core_web_sm model, which are not installed",
                            fix="pip install spacy==3.8.18, then python -m spacy download en_core_web_sm; or use "
                                "--splitter rule") from None
        return "rule"
    return "spacy"


def splitter(name: str = "auto") -> Splitter:
    """The function of :func:`resolve_splitter`'s choice (``spacy`` loads its model on first use)."""
    spacy = name == "spacy" or (name == "auto" and resolve_splitter(name) == "spacy")
    return spacy_splitter if spacy else rule_splitter


def segment(doc_id: str, clean_text: str, split: Splitter = rule_splitter) -> list[tuple[str, str]]:
    """``[(passage_id, text), ...]`` of one document."""
    text = clean_text.replace("\n", " ").strip()[:MAX_CHARS]
    sentences = split(text)
    passages: list[tuple[str, str]] = []
    for i in range(0, len(sentences), STRIDE):
        passages.append((f"{doc_id}:{len(passages)}", " ".join(sentences[i: i + WINDOW])))
        if i + WINDOW >= len(sentences):
            break
    return passages
