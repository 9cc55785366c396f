"""Persona tracking: the statements a user reveals about themselves, kept per user and offered as PTKB.

The iKAT interactive task never sends the user's persona: a system that wants a PTKB must build it from what the
user says. ``track_persona`` extracts self-statements from each turn's utterance and the history's user utterances
not yet seen, keeps them per user (``record.user_id``; offline, where it is empty, per conversation) in a store that
outlives topics and runs, and adds them to ``record.ptkb_all`` under keys the topic's own cannot take (``u1``,
``u2``, ...; ``uu1`` ... if the topic has a ``u1``), so ``rank_ptkb``, ``classify_ptkb`` and ``respond`` use them.

Extractors: ``rule`` (:func:`self_statements`, no model) or ``llm`` (the ``persona_statements`` prompt; an output
the guards refuse falls back to the rule, noted on the record).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_json
from ikatkit.capabilities import ChatLLM
from ikatkit.errors import IkatError
from ikatkit.llm.guards import ROLE_TAG, echoes_template, looping_phrase, normalize
from ikatkit.pipelines.base import Stage
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.registry import register

# A sentence ends after ., ! or ? and white space (users often go on in lower case, so unlike the collection's
# splitter, ikatkit.collection.segment.rule_splitter, no capital letter is required after it).
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
FIRST_PERSON = frozenset({"i", "i'm", "im", "i've", "i'd", "i'll", "my", "me", "mine", "myself"})
SECOND_PERSON = frozenset({"you", "your", "you're", "yours", "yourself", "u"})
# Words that open a question, a request (an imperative addressed to the system) or a condition ("if I visit one,
# which ...") rather than a statement.
OPENERS = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how", "can", "could", "would", "will",
           "should", "shall", "do", "does", "did", "is", "are", "am", "was", "were", "may", "might", "any",
           "please", "tell", "give", "show", "help", "list", "suggest", "recommend", "find", "explain", "compare",
           "describe", "let", "thanks", "thank", "if")
# A clause starts at a comma, semicolon or colon followed by such a word: "I'm vegan, can you ...".
_CLAUSE = re.compile(r"[,;:]\s+(?=(?:" + "|".join(OPENERS) + r")\b)", re.I)
_INTERJECTION = re.compile(r"^(?:yes|yeah|no|nope|ok|okay|well|so|also|and|but|oh|hmm|sure|great|right|actually"
                           r"|then|now)\b[,!.]?\s*", re.I)
# Information requests phrased in the first person: "I'd like to know ...", "I wonder ...".
_REQUEST = re.compile(r"\b(?:want|like|need|wish|love)\s+to\s+(?:know|learn|find\s+out|understand|ask|hear)\b"
                      r"|\bwonder(?:ing)?\b|\bcurious\b", re.I)
# Talk about the dialogue itself: "I see.", "I mean cardio.", "I think that's all for now."
_CHATTER = re.compile(r"^i\s+(?:see|mean|meant|understand|agree)\b|^i\s+think\s+that'?s\s+all\b", re.I)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
MAX_STATEMENT_WORDS = 30
LLM_BATCH = 8  # utterances per LLM call: the LLM's cache is written per call, so a killed run keeps its calls' work
EXTRACTORS = ("rule", "llm")


def words(text: str) -> list[str]:
    """Lower-cased words, apostrophes kept ("i'm")."""
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def sentences(text: str) -> list[str]:
    """Sentences: split after ., ! or ? and white space."""
    return [s for s in _SENTENCE.split(text.strip()) if s]


def _statement(clause: str) -> str | None:
    """``clause`` as a self-statement (interjections cut, "i" capitalised, a full stop added), or None."""
    text = clause.strip().rstrip(",;: ")
    while (cut := _INTERJECTION.sub("", text, count=1)) != text:
        text = cut
    tokens = words(text)
    if not tokens or text.endswith("?") or tokens[0] in OPENERS or not FIRST_PERSON & set(tokens):
        return None
    if SECOND_PERSON & set(tokens) or _REQUEST.search(text) or _CHATTER.search(text.replace("\u2019", "'")):
        return None
    text = re.sub(r"\bi\b", "I", text)
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!")) else text + "."


def self_statements(utterance: str) -> list[str]:
    """The rule extractor: the clauses of ``utterance`` in which the user says something about themselves.

    The utterance is cut into sentences (after ., ! or ? and white space) and each sentence into clauses (at a
    comma, semicolon or colon followed by a question or request word, :data:`OPENERS`). A clause is a
    self-statement when, leading interjections ("yes,", "ok,", "well") removed, it
    - has a first-person singular word (I, I'm, I've, I'd, I'll, my, me, mine, myself),
    - does not end with "?" and does not open with a question, request or condition word (what, can, tell,
      please, if, ...),
    - addresses no one ("you", "your": "I want you to ..." is a request), and
    - is no information request ("I'd like to know", "I wonder", "I'm curious") and no talk about the dialogue
      ("I see", "I mean ...", "I think that's all").
    Distinct statements (by :func:`ikatkit.llm.guards.normalize`) in order of appearance."""
    found: dict[str, str] = {}
    for sentence in sentences(utterance):
        for clause in _CLAUSE.split(sentence):
            statement = _statement(clause)
            if statement:
                found.setdefault(normalize(statement), statement)
    return list(found.values())


def check_statements(output: str, utterance: str) -> tuple[list[str], str | None]:
    """The self-statements in an LLM ``output`` and why it must not be used (or None).

    Refused: role tags or the prompt in it, a phrase looping. Lines are kept when they are in the first person,
    not questions, at most 30 words, and share a content word with the utterance (not invented); an output of
    lines none of which is kept is refused too. "none" is no statement and no problem."""
    from ikatkit.llm.parse import output_lines

    if ROLE_TAG.search(output) or echoes_template(output):
        return [], "persona statements echo the prompt"
    if looping_phrase(output):
        return [], "persona statements repeat a phrase"
    lines = [line for line in output_lines(output) if normalize(line) not in ("none", "")]
    own = content_words(utterance)
    kept: dict[str, str] = {}
    for line in lines:
        tokens = words(line)
        if (FIRST_PERSON & set(tokens) and not line.endswith("?") and len(tokens) <= MAX_STATEMENT_WORDS
                and content_words(line) & own):
            kept.setdefault(normalize(line), line if line.endswith((".", "!")) else line + ".")
    if lines and not kept:
        return [], "no persona statement grounded in the utterance"
    return list(kept.values()), None


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without stop words (scikit-learn's list), personal pronouns and one-letter
    words, plurals cut to the singular by rule (``-ies`` -> ``-y``, ``-s`` -> ``''`` except ``-ss``)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    words = set()
    for word in re.findall(r"[a-z0-9]+", text.lower().replace("\u2019", "'").replace("'", " ")):
        if word in ENGLISH_STOP_WORDS or word in FIRST_PERSON or word in SECOND_PERSON or len(word) < 2:
            continue
        if len(word) > 4 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    return words


def conversation_of(qid: str) -> str:
    """The conversation part of a query id (``9-1_3`` -> ``9-1``): the store's key when a record has no user id."""
    return qid.rpartition("_")[0] or qid


class PersonaStore:
    """Statements per user, kept in ``<folder>/persona.json`` (written atomically after each batch).

    Per user: ``statements`` (``{"n", "text", "turn"}``: number, text, the turn that first said it), ``turns``
    (the query ids processed, in order) and ``seen`` (the normalised utterances already read). A turn processed
    again (a resumed run redoing a batch) is offered what the store held when it was first processed, so a
    resumed run gives the same records as an uninterrupted one. ``folder`` None: kept in memory only."""

    FILE = "persona.json"

    def __init__(self, folder: str | Path | None, extractor: str) -> None:
        self.path = Path(folder) / self.FILE if folder else None
        self.extractor = extractor
        self.users: dict[str, dict[str, Any]] = {}
        if self.path and self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                users, kept = data["users"], data["extractor"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise IkatError(f"unreadable persona store ({err})", path=self.path,
                                fix="delete it (its statements are extracted again) or use another store folder")
            if kept != extractor:
                raise IkatError(f"the persona store was built by extractor {kept!r}, not {extractor!r}",
                                path=self.path, fix="use another store folder (or --out), or delete this one")
            self.users = users

    def user(self, user_id: str) -> dict[str, Any]:
        return self.users.setdefault(user_id, {"statements": [], "turns": [], "seen": []})

    def add(self, user_id: str, qid: str, utterances: list[str], extract: Any) -> None:
        """Process turn ``qid`` of ``user_id``: ``extract(utterance)`` of each utterance not yet seen, new
        statements kept (duplicates by normalised text dropped). A turn already processed is left as it is."""
        user = self.user(user_id)
        if qid in user["turns"]:
            return
        user["turns"].append(qid)
        seen, known = set(user["seen"]), {normalize(s["text"]) for s in user["statements"]}
        for utterance in utterances:
            if normalize(utterance) in seen:
                continue
            seen.add(normalize(utterance))
            user["seen"].append(normalize(utterance))
            for text in extract(utterance):
                if normalize(text) not in known:
                    known.add(normalize(text))
                    user["statements"].append({"n": len(user["statements"]) + 1, "text": text, "turn": qid})

    def statements(self, user_id: str, qid: str) -> list[dict[str, Any]]:
        """The statements of ``user_id`` known when turn ``qid`` was processed."""
        user = self.user(user_id)
        order = {turn: i for i, turn in enumerate(user["turns"])}
        upto = order.get(qid, len(order))
        return [s for s in user["statements"] if order.get(s["turn"], len(order)) <= upto]

    def save(self) -> None:
        if self.path:
            write_json(self.path, {"extractor": self.extractor, "users": self.users})


def offer(record: TurnRecord, statements: list[dict[str, Any]]) -> list[str]:
    """Add ``statements`` to ``record.ptkb_all`` as ``u<n>`` (another ``u`` in front while a key of the topic's
    takes one of them), leaving out those the topic's PTKB already says; the keys added."""
    prefix = "u"
    while any(f"{prefix}{s['n']}" in record.ptkb_all for s in statements):
        prefix += "u"
    own = {normalize(text) for text in record.ptkb_all.values()}
    added = []
    for statement in statements:
        if normalize(statement["text"]) not in own:
            record.ptkb_all[f"{prefix}{statement['n']}"] = statement["text"]
            added.append(f"{prefix}{statement['n']}")
    return added


@register
class TrackPersona(Stage):
    """Extract the user's self-statements, keep them per user in a store, offer them as the turn's PTKB.

    ``extractor``: ``rule`` (first-person clauses, :func:`self_statements`) or ``llm`` (the
    ``persona_statements`` prompt over each new utterance; refused outputs fall back to the rule). ``store``:
    the store's folder; without it ``ikatkit run`` keeps it in ``<out>/persona`` (:meth:`bind_out`), elsewhere
    it is kept in memory. The user is ``record.user_id``, or the conversation when that is empty."""

    name = "track_persona"
    provides = ("ptkb_all",)

    def __init__(self, llm: ChatLLM | None = None, extractor: str = "rule", store: str | None = None) -> None:
        self.check({"extractor": extractor, "llm": llm})
        self.llm, self.extractor = llm, extractor
        self.folder = store
        self._store: PersonaStore | None = None

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        extractor = options.get("extractor", "rule")
        if extractor not in EXTRACTORS:
            raise IkatError(f"unknown persona extractor {extractor!r}", where="extractor",
                            fix=f"use one of {EXTRACTORS}")
        if extractor == "llm" and options.get("llm") is None:
            raise IkatError("extractor 'llm' needs an LLM and none is declared", where="extractor",
                            fix='declare one ([resources.llm] kind = "llm") or use extractor = "rule"')

    def bind_out(self, out: str | Path) -> None:
        """Keep the store in ``<out>/persona`` unless the config names a folder (called by the run)."""
        if self.folder is None:
            self.folder = str(Path(out) / "persona")
            self._store = None

    @property
    def store(self) -> PersonaStore:
        if self._store is None:
            self._store = PersonaStore(self.folder, self.identity())
        return self._store

    def identity(self) -> str:
        """What made the store's statements: ``rule``, or ``llm:<model>``."""
        return "rule" if self.extractor == "rule" else f"llm:{getattr(self.llm, 'model', type(self.llm).__name__)}"

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        store = self.store
        users = {r.qid: r.user_id or conversation_of(r.qid) for r in records}
        said = {r.qid: [u for u, _ in r.history] + [r.utterance] for r in records}
        extracted: dict[str, list[str]] = {}
        problems: dict[str, tuple[str, str]] = {}
        if self.extractor == "llm":
            assert self.llm is not None  # check() refuses the llm extractor without an LLM
            new = list(dict.fromkeys(u for r in records if r.qid not in store.user(users[r.qid])["turns"]
                                     for u in said[r.qid] if normalize(u) not in store.user(users[r.qid])["seen"]))
            extracted, problems = llm_statements(self.llm, new)
        for record in records:
            def extract(utterance: str) -> list[str]:
                if utterance in problems:
                    problem, output = problems[utterance]
                    record.notes.append(f"{problem}: rule used")
                    record.rejected[self.name] = output
                return extracted[utterance] if utterance in extracted else self_statements(utterance)

            store.add(users[record.qid], record.qid, said[record.qid], extract)
            if offer(record, store.statements(users[record.qid], record.qid)):
                record.notes.append("track_persona: user statements offered as PTKB")
        store.save()
        return records


def llm_statements(llm: ChatLLM, utterances: list[str]) -> tuple[dict[str, list[str]], dict[str, tuple[str, str]]]:
    """The LLM's self-statements of each utterance; refused outputs are left out, their reason and output in the
    second dict (counted as the LLM's fallbacks: the rule is used for them). The LLM gets :data:`LLM_BATCH`
    utterances per call, so its cache keeps the work done before a kill."""
    from ikatkit.llm.prompts import STOPS, render

    outputs = [output for start in range(0, len(utterances), LLM_BATCH)
               for output in llm.chat([render("persona_statements", utterance=u)
                                       for u in utterances[start: start + LLM_BATCH]],
                                      stop=STOPS["persona_statements"])]
    extracted, problems = {}, {}
    for utterance, output in zip(utterances, outputs):
        statements, problem = check_statements(output, utterance)
        if problem:
            problems[utterance] = (problem, output)
            llm.count_fallback(f"{problem}: rule used")
        else:
            extracted[utterance] = statements
    return extracted, problems
