"""One user message answered: its one-turn record (history, ids, the user's PTKB), the config's stages, and what
is sent back within an edition's rules (:class:`Answerer`); the config changes the interactive task asks for."""

from __future__ import annotations

import sys
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.pipelines.config import RunConfig, with_stages
from ikatkit.pipelines.record import TurnRecord
from ikatkit.runs.model import strictly_decreasing
from ikatkit.runs.tokens import InteractiveRules, fit_response
from ikatkit.pipelines.session import RunSession
from ikatkit.topics import Topics

PTKB_STAGES = ("rank_ptkb", "gold_ptkb", "classify_ptkb")
GOLD_STAGES = {"manual_query": "the manual rewrite (resolved_utterance)", "gold_ptkb": "the gold PTKB"}


def with_persona_tracking(config: RunConfig) -> RunConfig:
    """The config with a ``track_persona`` stage before its PTKB stages (first, without any), unless it has one."""
    names = config.names()
    if "track_persona" in names:
        return config
    at = min((names.index(n) for n in PTKB_STAGES if n in names), default=0)
    return with_stages(config, [*config.stages[:at], {"stage": "track_persona"}, *config.stages[at:]])


def gold_readers(config: RunConfig) -> list[str]:
    """``stage reads what`` for each of the config's stages that reads what only topic files have (the manual
    rewrite, the gold PTKB): the interactive task's messages have neither."""
    return [f"{spec.name} reads {GOLD_STAGES[spec.name]}" for spec in config.stages if spec.name in GOLD_STAGES]


def message_ptkb(message: dict[str, Any]) -> dict[str, str] | None:
    """The user's PTKB the message carries (2026: ``user_meta.ptkb``, a list of statements) keyed by position
    (``"1"``, ``"2"``, ...); None when it carries none (a 2025 server)."""
    meta = message.get("user_meta")
    statements = meta.get("ptkb") if isinstance(meta, dict) else None
    if statements is None:
        return None
    if isinstance(statements, dict):
        return {str(key): str(text) for key, text in statements.items()}
    if not isinstance(statements, list):  # a string would be read letter by letter
        raise IkatError(f"the server's user_meta.ptkb is {type(statements).__name__}, not a list of statements",
                        where=f"message of user {message.get('user_id')} topic {message.get('topic_id')}",
                        fix="check --api points at the iKAT simulation API; report the message to the organizers")
    return {str(n): str(text) for n, text in enumerate(statements, start=1)}


def record_of(message: dict[str, Any], ptkb: dict[str, str] | None = None) -> TurnRecord:
    """The one-turn record of a user message: its history as (utterance, response) pairs, the topic's turn number,
    the user's PTKB."""
    pairs: list[tuple[str, str]] = []
    asked = ""
    for m in message["history"][:-1]:
        if m["role"] == "user":
            asked = m["content"]
        else:
            pairs.append((asked, m["content"]))
    topic = message["topic_id"]
    return TurnRecord(f"{topic}_{len(pairs) + 1}", message["utterance"], pairs, dict(ptkb or {}),
                      history_ids=[f"{topic}_{i}" for i in range(1, len(pairs) + 1)], user_id=message["user_id"])


def turn_number(message: dict[str, Any]) -> int:
    return sum(m["role"] == "user" for m in message["history"])


def key_of(message: dict[str, Any]) -> list[Any]:
    """The turn's key in the state and the store: ``[user, topic, n]``."""
    return [message["user_id"], message["topic_id"], turn_number(message)]


class Answerer:
    """The session's pipeline over one message at a time; each turn's PTKB from the message (2026), else from
    ``topics`` (a 2025 server), else none (said once, when the config reads a PTKB); ``k``: citations (None: the
    rules' maximum)."""

    def __init__(self, session: RunSession, topics: Topics | None, k: int | None, progress: bool) -> None:
        self.session, self.topics, self.k, self.progress = session, topics, k, progress
        self.warned = False
        self.known = {c.id for c in topics.conversations} if topics is not None else set()

    def ptkb(self, message: dict[str, Any]) -> tuple[dict[str, str], str]:
        """The turn's PTKB and where it came from: the message, ``--topics``, or nowhere (said once)."""
        given = message_ptkb(message)
        if given is not None:
            return given, "user_meta"
        if self.topics is not None and message["topic_id"] in self.known:
            return dict(self.topics.conversation(message["topic_id"]).ptkb), "topics"
        if self.progress and not self.warned and any(n in PTKB_STAGES for n in self.session.config.names()):
            print("warning: the server sends no user_meta.ptkb (a 2025 server) and "
                  + ("--topics has no conversation " + message["topic_id"] if self.topics else "no --topics was given")
                  + ": turns without a PTKB choose no statement (pass --topics FILE, the conversations' PTKB)",
                  file=sys.stderr, flush=True)
        self.warned = True
        return {}, "none"

    def compute(self, message: dict[str, Any], rules: InteractiveRules) -> dict[str, Any]:
        """The config's stages over the message's one-turn record, and what is sent back."""
        pipeline = self.session.pipeline()
        ptkb, source = self.ptkb(message)
        batch = [record_of(message, ptkb)]
        pipeline.check(batch)
        [record] = pipeline(batch)
        response, cut = fit_response(record.response, rules.max_tokens)
        if cut:
            record.notes.append(f"response cut at a sentence boundary to the API's {rules.max_tokens} tokens")
        citations = dict(strictly_decreasing(record.ranking[: self.k or rules.max_citations]))
        used = [key for key in record.ptkb_used if key in record.ptkb_all]
        meta: dict[str, Any] = {"ptkb_provenance": [record.ptkb_all[key] for key in used],
                                "used_passages": [pid for pid in record.used if pid in citations]}
        if extracted := [record.ptkb_all[key] for key in used if key not in ptkb]:
            meta["ptkb_extracted"] = extracted  # track_persona's, from the user's own words
        return {"key": key_of(message), "qid": record.qid, "topic_id": message["topic_id"],
                "user_id": message["user_id"], "utterance": message["utterance"],
                "history_len": len(message["history"]), "ptkb_source": source, "record": record.to_json(),
                "seconds": pipeline.seconds, "cut": cut, "sent": {"response": response, "citations": citations,
                                                                  "meta": meta}}
