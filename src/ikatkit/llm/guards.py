"""Checks on LLM outputs before a pipeline uses them: degenerate outputs are named, never used.

Small models (and large ones, sometimes) copy an earlier utterance instead of rewriting, keep the role tags
of the prompt's context (``User: ...``), echo the prompt's sections (``### User Question: ... ### Response:``),
write a heading and stop, repeat one sentence, or list the same query several times. Each check returns the reason
an output is rejected, or ``None`` when it may be used; the stage then falls back (raw utterance, top passage, the
query) and notes the reason on the record (the run's manifest counts the notes). A response that loops may instead
be cut before its loop (:func:`cut_before_loop`) when what comes before is a usable answer. docs/guards.md shows
each guard on the real outputs it was written for.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from difflib import SequenceMatcher
from functools import lru_cache

from ikatkit.llm.parse import output_lines

ROLE_TAG = re.compile(r"^\s*(user|system|assistant|human|bot)\s*:", re.I | re.M)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+")
_HEADING = re.compile(r"^\s*#{1,6}\s")
MIN_REPEATED_WORDS = 3
NEAR_REPEAT_WORDS, NEAR_REPEAT_RATIO = 8, 0.9  # sentences this long count as said again when this similar
MIN_CUT_COPY_WORDS = 5  # a last sentence cut short counts as a copy when this many words start an earlier one
MIN_KEPT_WORDS, MIN_GROUNDED = 8, 0.5  # what a cut keeps: this many words, this share of them from the passages
CUT_NOTE = "cut before the loop"  # how a stage's note ends when it used the output cut before its loop
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


def _sentences(text: str) -> list[tuple[int, str]]:
    """The text's sentences as (offset of the sentence in ``text``, its normalized words)."""
    found, start = [], 0
    for piece in _SENTENCE.split(text):
        start = text.index(piece, start)
        found.append((start, normalize(piece)))
        start += len(piece)
    return found


def _says_again(sentence: str, earlier: str, last_cut: bool) -> bool:
    """Whether ``sentence`` repeats ``earlier``: the same words (three or more), nearly the same (eight words or
    more, one word added or changed: "It is also a complete protein ..."), or, for a last sentence the output's
    length limit cut short, the start of ``earlier`` (five words or more)."""
    words, before = sentence.split(), earlier.split()
    if len(words) >= MIN_REPEATED_WORDS and words == before:
        return True
    if min(len(words), len(before)) >= NEAR_REPEAT_WORDS and \
            SequenceMatcher(None, words, before, autojunk=False).ratio() >= NEAR_REPEAT_RATIO:
        return True
    return last_cut and len(words) >= MIN_CUT_COPY_WORDS and before[: len(words)] == words


def _first_repeat(text: str) -> tuple[int, str] | None:
    """Where the first sentence said again starts in ``text``, and the sentence it repeats."""
    sentences = _sentences(text)
    last_cut = not text.rstrip().endswith((".", "!", "?", ":", '"', ")"))
    for j, (start, sentence) in enumerate(sentences):
        cut = last_cut and j == len(sentences) - 1
        for _, earlier in sentences[:j]:
            if _says_again(sentence, earlier, cut):
                return start, earlier
    return None


def repeated_sentence(text: str) -> str | None:
    """A sentence the text says again (the repeated one, normalized), else None: word for word, nearly (one word
    added or changed in a long sentence), or as a last copy cut short by the length limit."""
    found = _first_repeat(text)
    return found[1] if found else None


def only_heading(text: str) -> bool:
    """Markdown headings and nothing else ("### How to Get Around Japan")."""
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(_HEADING.match(line) for line in lines)


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


def _phrase_loop(text: str, longest: int = 4, times: int = 4) -> tuple[int, str] | None:
    """Where the first loop of a phrase starts in ``text`` (its first copy), and the phrase."""
    words = list(_WORD.finditer(text.lower()))
    tokens = [w.group() for w in words]
    for size in range(1, longest + 1):
        for start in range(len(tokens) - size * times + 1):
            phrase = tokens[start: start + size]
            if all(tokens[start + k * size: start + (k + 1) * size] == phrase for k in range(1, times)):
                return words[start].start(), " ".join(phrase)
    return None


def looping_phrase(text: str, longest: int = 4, times: int = 4) -> str | None:
    """A phrase of up to ``longest`` words said ``times`` times or more in a row (the first such), else None:
    "- Microplastics - Microplastics - Microplastics - Microplastics", a loop no sentence split shows."""
    found = _phrase_loop(text, longest, times)
    return found[1] if found else None


def check_response(response: str) -> str | None:
    """Why a response (or a GtR initial answer) must not be used, or None: empty, the template, only a heading, a
    loop (a sentence said again, a short phrase four times in a row)."""
    if not response.strip():
        return "empty response"
    if echoes_template(response) or ROLE_TAG.search(response):
        return "response echoes the prompt template"
    if only_heading(response):
        return "response is only a heading"
    if repeated_sentence(response):
        return "response repeats a sentence"
    if looping_phrase(response):
        return "response repeats a phrase"
    return None


def cut_before_loop(response: str, passages: Sequence[str]) -> str | None:
    """The response up to where it starts to loop (a sentence said again: from its second copy; a phrase looping:
    from its first copy, with the list marker before it), when that is a usable answer, else None.

    Usable: it passes :func:`check_response`, has at least eight words, and at least half of its content words
    (Lucene's stop words aside) occur in ``passages``, the texts it was written from, so a cut that keeps only a
    preamble ("I'm glad to help! Here's a response that addresses your question.") is no answer."""
    starts = [found[0] for found in (_first_repeat(response), _phrase_loop(response)) if found]
    if not starts:
        return None
    kept = response[: min(starts)].rstrip(" \t\n-*•,;:")
    words = normalize(kept).split()
    if check_response(kept) or len(words) < MIN_KEPT_WORDS:
        return None
    content = set(words) - LUCENE_STOP_WORDS
    known = set(normalize(" ".join(passages)).split())
    return kept if content and len(content & known) >= MIN_GROUNDED * len(content) else None


SENTENCE_END = re.compile(r"(?<=[^\d\s])[.!?][\"')\]]*(?=\s)")  # "1." of a list and "3.5" end no sentence


def end_at_sentence(text: str) -> str:
    """``text`` ending at a sentence: where a length limit stopped it inside a sentence (it ends without . ! ? on
    a line of prose), that unfinished sentence, perhaps a cut word ("lact"), is dropped when what comes before is
    at least ``MIN_KEPT_WORDS`` words; lists and texts without a full sentence before the cut are kept as they are."""
    text = text.rstrip()
    if not text or text[-1] in ".!?\"')]:":
        return text
    ends = list(SENTENCE_END.finditer(text))
    if not ends or "\n" in text[ends[-1].end():] or len(text[: ends[-1].end()].split()) < MIN_KEPT_WORDS:
        return text
    return text[: ends[-1].end()]


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


class HeldRefusals(logging.Filter):
    """The refusals :meth:`ikatkit.llm.base.LLM.count_fallback` warns of one by one (``<qid>: <note> (n so far)``),
    held back and counted by note while progress bars are drawn, to be said in one line after them (:meth:`line`)."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: Counter[str] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.funcName != "count_fallback" or not record.args:
            return True
        what = str(record.args[0] if isinstance(record.args, tuple) else record.args)
        self.notes[what.partition(": ")[2] or what] += 1
        return False

    def line(self) -> str:
        """One line: how many outputs were refused or cut, by note (empty when none was)."""
        if not self.notes:
            return ""
        return (f"guards: {sum(self.notes.values())} LLM outputs refused or cut ("
                + "; ".join(f"{note} x{n}" for note, n in self.notes.most_common()) + "); each turn's note is on its "
                "record (ikatkit view shows them)")


@contextmanager
def held_refusals() -> Iterator[HeldRefusals]:
    """Hold the LLM's per-output refusal warnings back for the block (:class:`HeldRefusals`)."""
    logger = logging.getLogger("ikatkit.llm.base")
    held = HeldRefusals()
    logger.addFilter(held)
    try:
        yield held
    finally:
        logger.removeFilter(held)
