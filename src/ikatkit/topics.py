"""Conversations, turns and PTKBs of iKAT 2023/2024/2025 topic files, in one typed model.

The query id of a turn is ``{conversation}_{turn}``, e.g. ``9-1_3``. PTKB statements are keyed by
strings: the file's keys in 2023/2024 (``"1"``, ``"2"``, ...), the 1-based position in 2025, where the
file gives a list.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.suggest import did_you_mean, path_fix
from ikatkit.textfile import read_text

log = logging.getLogger(__name__)

YEARS = (2023, 2024, 2025)
QUERY_KINDS = ("raw", "manual")


def query_id(conversation_id: str, turn_id: int) -> str:
    """The track's query id of a turn."""
    return f"{conversation_id}_{turn_id}"


def split_query_id(qid: str) -> tuple[str, int]:
    """Inverse of :func:`query_id`: ``"9-1_3"`` -> ``("9-1", 3)``."""
    conversation, _, turn = qid.rpartition("_")
    if not conversation or not turn.isdigit():
        raise IkatError(f"malformed query id {qid!r}", fix="query ids look like '9-1_3' ({conversation}_{turn})")
    return conversation, int(turn)


@dataclass(frozen=True)
class Turn:
    """One user turn with its ground truth (absent in topics released before judging)."""

    conversation_id: str
    turn_id: int
    utterance: str
    resolved_utterance: str | None = None
    response: str | None = None
    ptkb_provenance: tuple[str, ...] = ()
    response_provenance: tuple[str, ...] = ()

    @property
    def qid(self) -> str:
        return query_id(self.conversation_id, self.turn_id)


@dataclass(frozen=True)
class Conversation:
    """A conversation: its PTKB (key -> statement, file order) and its turns in order."""

    id: str
    title: str
    ptkb: Mapping[str, str]
    turns: tuple[Turn, ...]

    def history(self, turn_id: int) -> tuple[Turn, ...]:
        """The turns before ``turn_id``: the canonical context of that turn."""
        return tuple(t for t in self.turns if t.turn_id < turn_id)

    def ptkb_key(self, statement: str) -> str:
        """The key of a PTKB statement given by its text (2025 cites statements by text)."""
        for key, text in self.ptkb.items():
            if text.strip() == statement.strip():
                return key
        raise KeyError(statement)


@dataclass(frozen=True)
class Topics:
    """All conversations of one topic file, or some of them (:meth:`subset`; ``whole``: the file's turn count)."""

    year: int
    conversations: tuple[Conversation, ...]
    path: Path | None = None
    whole: int | None = None
    _turns: dict[str, Turn] = field(init=False, repr=False, compare=False)
    _conversation_of: dict[str, Conversation] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        turns: dict[str, Turn] = {}
        owners: dict[str, Conversation] = {}
        for conversation in self.conversations:
            for turn in conversation.turns:
                if turn.qid in turns:
                    raise IkatError(f"duplicate turn {turn.qid}", path=self.path,
                                    fix="each conversation number and turn_id pair must be unique")
                turns[turn.qid] = turn
                owners[turn.qid] = conversation
        object.__setattr__(self, "_turns", turns)
        object.__setattr__(self, "_conversation_of", owners)

    def __iter__(self) -> Iterator[Turn]:
        return iter(self._turns.values())

    def __len__(self) -> int:
        return len(self._turns)

    @property
    def qids(self) -> list[str]:
        return list(self._turns)

    def turn(self, qid: str) -> Turn:
        return self._turns[qid]

    def conversation_of(self, qid: str) -> Conversation:
        return self._conversation_of[qid]

    def conversation(self, conversation_id: str) -> Conversation:
        for conversation in self.conversations:
            if conversation.id == conversation_id:
                return conversation
        raise KeyError(conversation_id)

    def subset(self, conversation_ids: list[str]) -> Topics:
        """The topics restricted to some conversations, in the given order; an id the topics lack is one error
        suggesting the close ones (``--conversations``)."""
        known = [c.id for c in self.conversations]
        unknown = [c for c in conversation_ids if c not in known]
        if unknown:
            shown = ", ".join(repr(c) for c in unknown)
            fix = did_you_mean(unknown[0], known, f"pass conversations of these topics ({len(known)}, e.g. "
                                                  + ", ".join(known[:3]) + ")")
            raise IkatError(f"--conversations: no conversation {shown} in the topics", path=self.path, fix=fix)
        return Topics(self.year, tuple(self.conversation(c) for c in conversation_ids), self.path,
                      len(self) if self.whole is None else self.whole)

    def ptkb_qrels(self) -> dict[str, dict[str, int]]:
        """PTKB qrels from the topics' ``ptkb_provenance``: for each turn that cites statements, every statement
        of its conversation, 1 if cited, else 0 (the organizers' 2023 PTKB qrels exactly; 2024 and 2025 ship none)."""
        return {turn.qid: {key: int(key in turn.ptkb_provenance) for key in conversation.ptkb}
                for conversation in self.conversations for turn in conversation.turns if turn.ptkb_provenance}

    def queries(self, kind: str = "raw") -> dict[str, str]:
        """Query id -> text: ``raw`` utterances or ``manual`` (resolved) ones, raw where a resolved one is empty."""
        if kind == "raw":
            return {t.qid: t.utterance for t in self}
        if kind == "manual":
            missing = [t.qid for t in self if not t.resolved_utterance]
            if len(missing) == len(self):
                raise IkatError("no turn has a resolved_utterance", path=self.path,
                                fix="manual queries need topics with resolved utterances (released after judging)")
            if missing:
                log.warning("%s an empty resolved_utterance (%s); %s raw utterance is used",
                            "1 turn has" if len(missing) == 1 else f"{len(missing)} turns have", ", ".join(missing[:5]),
                            "its" if len(missing) == 1 else "their")
            return {t.qid: t.resolved_utterance or t.utterance for t in self}
        raise IkatError(f"unknown query kind {kind!r}", fix=f"use one of {QUERY_KINDS}")


def detect_year(data: Any, path: Path | None = None) -> int:
    """Guess the format year of parsed topic JSON: 2025 lists PTKB and ``responses``; 2024 numbers are ints.

    2023 and 2024 share one schema; a 2024 file with string numbers reads as 2023 unless the year is given.
    """
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        raise IkatError("topics must be a non-empty JSON list of conversation objects", path=path,
                        fix="pass the organizers' topics JSON (e.g. 2023_test_topics.json)")
    first = data[0]
    if "responses" in first or isinstance(first.get("ptkb"), list):
        return 2025
    return 2024 if isinstance(first.get("number"), int) else 2023


NUMBERING = {2023: "conversation numbers such as '9-1': topic-user", 2024: "integer conversation numbers"}


def _numbered_as(data: list[Any]) -> int | None:
    """2023 when every conversation number is a topic-user string (``9-1``), 2024 when every one is an integer,
    else None (a 2024 file with string numbers such as ``"0"`` reads as 2024 when asked)."""
    numbers = [c.get("number") if isinstance(c, dict) else None for c in data]
    if all(isinstance(n, str) and re.fullmatch(r"\d+-\d+", n) for n in numbers):
        return 2023
    return 2024 if all(isinstance(n, int) and not isinstance(n, bool) for n in numbers) else None


class _Reader:
    """Reads one conversation object, naming the position of any malformed field."""

    def __init__(self, path: Path | None, year: int) -> None:
        self.path, self.year = path, year
        self.turns_field = "responses" if year == 2025 else "turns"
        self.utterance_field = "user_utterance" if year == 2025 else "utterance"

    def fail(self, where: str, message: str, fix: str) -> IkatError:
        return IkatError(message, path=self.path, where=where, fix=fix)

    def require(self, obj: dict[str, Any], name: str, types: type | tuple[type, ...], where: str) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(where, f"expected a JSON object, got {type(obj).__name__}", "see the topic schema")
        if name not in obj:
            raise self.fail(where, f"missing field {name!r}",
                            f"{self.year} topics need {name!r}; is this a {self.year} file? pass --year")
        value = obj[name]
        if not isinstance(value, types):
            expected = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
            raise self.fail(where, f"field {name!r} is {type(value).__name__}, expected {expected}",
                            f"check the {self.year} topic schema")
        return value

    def ptkb(self, obj: dict[str, Any], where: str) -> dict[str, str]:
        raw = obj.get("ptkb", {} if self.year != 2025 else [])
        if self.year == 2025:
            if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
                raise self.fail(where, "field 'ptkb' must be a list of statements in 2025 topics", "check the file")
            return {str(i): s for i, s in enumerate(raw, start=1)}
        if not isinstance(raw, dict) or not all(isinstance(s, str) for s in raw.values()):
            raise self.fail(where, f"field 'ptkb' must be an object key -> statement in {self.year} topics",
                            "check the file, or pass --year 2025 for list-shaped PTKBs")
        return {str(k): v for k, v in raw.items()}

    def conversation(self, obj: dict[str, Any], index: int) -> Conversation:
        where = f"conversation {index}"
        number = self.require(obj, "number", (str, int), where)
        cid = str(number)
        where = f"conversation {index} (number {cid})"
        ptkb = self.ptkb(obj, where)
        raw_turns = self.require(obj, self.turns_field, list, where)
        turns = tuple(self.turn(t, cid, ptkb, f"{where}, turn {i}") for i, t in enumerate(raw_turns))
        return Conversation(cid, str(obj.get("title", "")), ptkb, turns)

    def turn(self, obj: dict[str, Any], cid: str, ptkb: dict[str, str], where: str) -> Turn:
        turn_id = self.require(obj, "turn_id", int, where)
        where = f"{where} (turn_id {turn_id})"
        utterance = self.require(obj, self.utterance_field, str, where)
        if self.year == 2025:
            statements = obj.get("relevant_ptkbs") or []
            keys = []
            for statement in statements:
                key = next((k for k, s in ptkb.items() if s.strip() == str(statement).strip()), None)
                if key is None:
                    raise self.fail(where, f"relevant_ptkbs statement {statement!r} is not in the PTKB",
                                    "relevant_ptkbs must quote the conversation's PTKB statements exactly")
                keys.append(key)
            provenance = obj.get("citations") or []
        else:
            keys = [str(k) for k in obj.get("ptkb_provenance") or []]
            unknown = [k for k in keys if k not in ptkb]
            if unknown:
                raise self.fail(where, f"ptkb_provenance keys {unknown} are not in the conversation's PTKB",
                                "ptkb_provenance must use the PTKB's keys")
            provenance = obj.get("response_provenance") or []
        return Turn(cid, turn_id, utterance, obj.get("resolved_utterance"), obj.get("response"),
                    tuple(keys), tuple(str(p) for p in provenance))


def parse_topics(data: Any, year: int | None = None, path: Path | None = None) -> Topics:
    """Build :class:`Topics` from parsed JSON; ``year`` is detected when not given."""
    detected = detect_year(data, path)
    year = year or detected
    if year not in YEARS:
        raise IkatError(f"unsupported topic year {year}", path=path, fix=f"use one of {YEARS}")
    if (year == 2025) != (detected == 2025):
        raise IkatError(f"the file looks like {detected} topics, not {year}", path=path,
                        fix=f"pass --year {detected} or the right file")
    if year != detected and _numbered_as(data) == detected:
        raise IkatError(f"the file looks like {detected} topics ({NUMBERING[detected]}), not {year}: a {year} run of "
                        f"them would be {detected}'s turns in {year}'s format", path=path,
                        fix=f"leave --year out (they read as {detected} topics), or pass the {year} topics; to "
                            f"rehearse the {year} format on {detected}'s turns, convert a run of them: `ikatkit "
                            f"convert RUN --to {year} --out FILE`")
    reader = _Reader(path, year)
    return Topics(year, tuple(reader.conversation(c, i) for i, c in enumerate(data)), path)


def load_topics(path: str | Path, year: int | None = None) -> Topics:
    """Read a topic file of any supported year (detected from its shape unless ``year`` is given)."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("topic file not found", path=path,
                        fix=path_fix(path, "pass the path of the year's topics JSON"))
    text = read_text(path)
    if not text.strip():
        raise IkatError("topic file is empty", path=path, fix="pass the organizers' topics JSON")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise IkatError(f"invalid JSON: {err.msg}", path=path, where=f"line {err.lineno}, column {err.colno}",
                        fix="the topics must be the organizers' JSON file, unmodified") from None
    return parse_topics(data, year, path)
