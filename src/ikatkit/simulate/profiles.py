"""Behaviour profiles of simulated users: how they type, whether they answer the system, how long they stay.

iKAT 2026 evaluates systems with simulated users that share an information need but differ in language skill,
cooperativeness and patience. A profile is a set of parts, one or more joined by ``+`` (``typos+impatient``):

- language (applied in this order, each deterministic given the seed and the turn's query id):
  ``nonnative`` (simpler words from ``data/profiles/simpler_words.tsv``, no articles, each other function word
  dropped with probability 1/2, no punctuation), ``terse`` (only content words: every word of
  ``data/profiles/function_words.txt`` dropped, negations kept), ``typos`` (character-level errors, below);
- cooperativeness: ``cooperative`` answers a question of the system's last response from the persona (the PTKB
  statement sharing most content words with the question, said in the first person) before its own utterance;
  ``uncooperative`` ignores it and reveals nothing (the recorded users' behaviour, so nothing changes offline);
- patience: ``impatient`` leaves after :data:`IMPATIENT_TURNS` turns, or after :data:`UNSERVED_IN_A_ROW` answers in
  a row that do not serve its need (longer than it reads, :data:`READ_WORDS`, or sharing no content word with the
  need: off-topic); ``patient`` goes on (the default).

``clean`` is no part at all. Answers are the canonical responses offline (``topics perturb``) and the system's in
``simulate``; the same seed gives the same user in both.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.topics import parse_topics

LANGUAGE = ("nonnative", "terse", "typos")  # in the order they apply
COOPERATION = ("cooperative", "uncooperative")
PATIENCE = ("impatient", "patient")
PARTS = (*LANGUAGE, *COOPERATION, *PATIENCE)
CLEAN = "clean"

# Between 10 and 12 per cent of the terms of web search queries are misspelled (Cucerzan and Brill, EMNLP 2004, as
# quoted by Martins and Silva, "Spelling Correction for Search Engine Queries", EsTAL 2004): each word of three
# or more letters gets one error with this probability. Damerau (CACM 1964) found over 80% of misspellings one
# insertion, deletion, substitution or transposition: the four edits below, equally likely.
TYPO_RATE = 0.11
TYPO_MIN_LETTERS = 3
TYPO_EDITS = ("adjacent", "deletion", "doubling", "transposition")
FUNCTION_WORD_DROP = 0.5  # nonnative: each function word other than an article is dropped with this probability
ARTICLES = frozenset({"a", "an", "the"})
SUBJECTS = frozenset({"i", "i'm", "you"})  # nonnative keeps who is speaking to whom
NEGATIONS = frozenset({"no", "not", "never", "nor", "can't", "cannot", "don't", "doesn't", "didn't", "won't",
                       "isn't", "aren't", "wasn't", "shouldn't", "wouldn't", "couldn't", "without"})
# Silent reading of English non-fiction averages 238 words a minute (Brysbaert, J. Memory and Language 2019): an
# impatient user who gives an answer half a minute reads about 120 words; a longer answer does not serve it.
READ_WORDS = 120
IMPATIENT_TURNS = 6  # an impatient user says at most this many utterances
UNSERVED_IN_A_ROW = 2  # ... and leaves after this many answers in a row that do not serve its need
STEM = 5  # words match on their first five letters ("allergic" ~ "allergy", "vegetarians" ~ "vegetarian")

PROMPTS = {  # what an LLM user is told, per part (patience is applied by the simulator, as the turn limit is)
    "nonnative": "English is not your first language: use simple words, leave out articles such as 'the' and "
                 "'a' and some small words, and use no punctuation.",
    "terse": "You are in a hurry: type only the key words, never full sentences.",
    "typos": "You type fast and do not correct yourself: about one word in ten has a typo.",
    "cooperative": "When the system asks you something, first answer it from what is true of you, then go on.",
    "uncooperative": "Ignore any question the system asks you and never tell it anything about yourself.",
    "impatient": "You are impatient: you want short, direct answers.",
    "patient": "",
}


@cache
def _data(name: str) -> list[str]:
    text = (resources.files("ikatkit") / "data" / "profiles" / name).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


@cache
def function_words() -> frozenset[str]:
    return frozenset(w.strip().lower() for w in _data("function_words.txt"))


@cache
def stop_words() -> frozenset[str]:
    """Function words and conversational fillers: what is not a content word."""
    return function_words() | {w.strip().lower() for w in _data("fillers.txt")}


@cache
def simpler_words() -> dict[str, str]:
    return dict(line.split("\t", 1) for line in _data("simpler_words.tsv"))


@cache
def adjacent_keys() -> dict[str, str]:
    """Letter -> the letters next to it on the keyboard of ``keyboard_qwerty.txt`` (staggered rows)."""
    centres = {c: (r, col + r * 0.5) for r, row in enumerate(_data("keyboard_qwerty.txt")) for col, c in enumerate(row)}
    return {a: "".join(b for b, (r2, x2) in centres.items()
                       if b != a and abs(r2 - r1) <= 1 and abs(x2 - x1) < 1.5)
            for a, (r1, x1) in centres.items()}


def words(text: str) -> list[str]:
    """Words of a text, apostrophes inside them kept, punctuation dropped."""
    return re.findall(r"\w+(?:'\w+)*", text)


def content_stems(text: str) -> set[str]:
    """The content words of a text (not :func:`stop_words`), cut to :data:`STEM` letters."""
    return {w.lower()[:STEM] for w in words(text) if w.lower() not in stop_words()}


def first_person(statement: str) -> str:
    """A persona statement in the first person: the 2025 simulation data writes them as 'You are ...'."""
    swaps = [(r"^you are\b", "I am"), (r"^you're\b", "I'm"), (r"^you\b", "I"), (r"\byou are\b", "I am"),
             (r"\byourself\b", "myself"), (r"\byours\b", "mine"), (r"\byour\b", "my"), (r"\byou\b", "me")]
    text = statement.strip()
    if not re.match(r"you\b|your\b", text, re.IGNORECASE):
        return text
    for pattern, replacement in swaps:
        text = re.sub(pattern, replacement, text, flags=re.IGNORECASE)
    return text[0].upper() + text[1:]


def questions(response: str) -> list[str]:
    """The sentences of a response that ask the user something (end with a question mark)."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", response or "") if s.strip().endswith("?")]


def _case_like(word: str, model: str) -> str:
    return word.capitalize() if model[:1].isupper() else word


def _typo(word: str, rng: random.Random) -> str:
    """One of the four edits at a random position of a word (the first letter kept, as typists rarely miss it)."""
    edit = rng.choice(TYPO_EDITS)
    i = rng.randrange(1, len(word))
    if edit == "adjacent":
        near = adjacent_keys().get(word[i].lower(), "")
        if near:
            key = rng.choice(near)
            return word[:i] + (key.upper() if word[i].isupper() else key) + word[i + 1:]
        edit = "doubling"  # a digit or a letter off the layout: doubled instead
    if edit == "deletion":
        return word[:i] + word[i + 1:]
    if edit == "doubling":
        return word[:i] + word[i] + word[i:]
    j = i if i < len(word) - 1 else i - 1  # transposition of letters j and j+1
    return word[:j] + word[j + 1] + word[j] + word[j + 2:]


def typos(text: str, rng: random.Random) -> str:
    """Each word of :data:`TYPO_MIN_LETTERS`+ letters gets one edit with probability :data:`TYPO_RATE`."""
    def edit(match: re.Match[str]) -> str:
        word = match.group()
        return _typo(word, rng) if len(word) >= TYPO_MIN_LETTERS and rng.random() < TYPO_RATE else word
    return re.sub(r"[A-Za-z]+", edit, text)


def nonnative(text: str, rng: random.Random) -> str:
    """Simpler words, no articles, function words dropped at :data:`FUNCTION_WORD_DROP`, no punctuation."""
    out: list[str] = []
    for word in words(text):
        low = word.lower()
        if low in ARTICLES or (low in function_words() and low not in SUBJECTS and rng.random() < FUNCTION_WORD_DROP):
            continue
        out.append(_case_like(simpler_words()[low], word) if low in simpler_words() else word)
    return " ".join(out)


def terse(text: str, rng: random.Random) -> str:
    """Only the content words (and negations); the words as they were if none is left. ``rng`` is unused."""
    kept = [w for w in words(text) if w.lower() not in stop_words() or w.lower() in NEGATIONS]
    return " ".join(kept or words(text))


TRANSFORMS = {"nonnative": nonnative, "terse": terse, "typos": typos}


@dataclass(frozen=True)
class Profile:
    """A simulated user's behaviour: its parts (see the module) and the seed of its random choices."""

    parts: frozenset[str] = frozenset()
    seed: int = 0

    @property
    def name(self) -> str:
        return "+".join(p for p in PARTS if p in self.parts) or CLEAN

    def rewrite(self, text: str, key: str) -> str:
        """The language parts applied to ``text``; ``key`` (the turn's query id) and the seed fix the choices."""
        for part in LANGUAGE:
            if part in self.parts:
                text = TRANSFORMS[part](text, random.Random(f"{self.seed}:{key}:{part}"))
        return text

    def answer(self, response: str | None, ptkb: Mapping[str, str]) -> tuple[str, str] | None:
        """Cooperative users: (PTKB key, first-person statement) answering the response's question, if it asks one
        and a statement shares a content word with it; None otherwise."""
        asked = questions(response or "")
        if "cooperative" not in self.parts or not asked:
            return None
        stems = content_stems(" ".join(asked))
        scored = [(len(stems & content_stems(s)), -i, k) for i, (k, s) in enumerate(ptkb.items())]
        best = max(scored, default=(0, 0, ""))
        return (best[2], first_person(ptkb[best[2]])) if best[0] > 0 else None

    @staticmethod
    def serves(need: str, response: str) -> bool:
        """Whether an answer serves a need: no longer than :data:`READ_WORDS` and sharing a content word."""
        return len(response.split()) <= READ_WORDS and bool(content_stems(need) & content_stems(response))

    def leaves(self, exchanges: Sequence[tuple[str, str | None]]) -> str | None:
        """Why an impatient user leaves after these (need, answer) exchanges, or None to go on."""
        if "impatient" not in self.parts:
            return None
        if len(exchanges) >= IMPATIENT_TURNS:
            return "turns"
        recent = exchanges[-UNSERVED_IN_A_ROW:]  # an answer that is None (topics without responses) never counts
        if len(recent) == UNSERVED_IN_A_ROW and not any(r is None or self.serves(n, r) for n, r in recent):
            return "unserved"
        return None

    def utterance(self, key: str, recorded: str, previous: str | None,
                  ptkb: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
        """What the user says for a recorded utterance after the system's ``previous`` answer, and its notes."""
        meta: dict[str, Any] = {"profile": self.name, "seed": self.seed}
        answered = self.answer(previous, ptkb)
        if answered:
            recorded = f"{answered[1].rstrip('.')}. {recorded}"
            meta["answered_with_ptkb"] = answered[0]
        return self.rewrite(recorded, key), meta

    def prompt(self) -> str:
        """The behaviour as instructions for an LLM user."""
        return " ".join(PROMPTS[p] for p in PARTS if p in self.parts and PROMPTS[p])


def parse_profile(spec: str, seed: int = 0) -> Profile:
    """A profile from its name: ``clean`` or parts joined by ``+`` (``typos+impatient``)."""
    names = [p.strip() for p in spec.split("+") if p.strip()]
    if names == [CLEAN]:
        return Profile(frozenset(), seed)
    unknown = [p for p in names if p not in PARTS]
    if not names or unknown:
        raise IkatError(f"unknown profile part(s) {unknown or [spec]}", where="--profile",
                        fix=f"use {CLEAN!r} or parts of {', '.join(PARTS)} joined by '+', e.g. typos+impatient")
    for group in (COOPERATION, PATIENCE):  # language parts combine; these exclude each other
        clash = [p for p in group if p in names]
        if len(clash) > 1:
            raise IkatError(f"profile parts {clash} exclude each other", where="--profile", fix="keep one of them")
    return Profile(frozenset(names), seed)


def perturb(data: list[Any], profile: Profile, year: int | None = None,
            path: Any = None) -> tuple[list[Any], dict[str, Any]]:
    """Parsed topic JSON of any year with each user utterance said by ``profile`` against the canonical
    responses, every other field kept; an impatient user's turns after it leaves are dropped. Returns the new
    JSON and a summary (profile, seed, turns changed, PTKB statements answered, conversations left early)."""
    topics = parse_topics(data, year, path)
    turns_field, utterance_field = ("responses", "user_utterance") if topics.year == 2025 else ("turns", "utterance")
    out = copy.deepcopy(data)
    summary: dict[str, Any] = {"profile": profile.name, "seed": profile.seed, "year": topics.year,
                               "turns": 0, "changed": 0, "answered": {}, "left": {}}
    for conversation, raw in zip(topics.conversations, out):
        kept: list[Any] = []
        exchanges: list[tuple[str, str | None]] = []
        previous = None
        for turn, raw_turn in zip(conversation.turns, raw[turns_field]):
            left = profile.leaves(exchanges)
            if left:
                summary["left"][conversation.id] = {"after_turn": kept[-1]["turn_id"], "reason": left,
                                                    "turns_dropped": len(conversation.turns) - len(kept)}
                break
            text, meta = profile.utterance(turn.qid, turn.utterance, previous, conversation.ptkb)
            summary["changed"] += text != turn.utterance
            if "answered_with_ptkb" in meta:
                summary["answered"][turn.qid] = meta["answered_with_ptkb"]
            raw_turn[utterance_field] = text
            kept.append(raw_turn)
            exchanges.append((turn.resolved_utterance or turn.utterance, turn.response))
            previous = turn.response
        raw[turns_field] = kept
        summary["turns"] += len(kept)
    return out, summary
