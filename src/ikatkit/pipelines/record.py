"""The record one turn carries through a pipeline: every stage's output is kept on it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ikatkit.topics import Conversation, Topics, Turn


@dataclass
class TurnRecord:
    """A turn and what the stages made of it.

    ``query`` is the text retrieval uses (the rewrite, or the resolved utterance in a manual run);
    the raw ``utterance`` stays beside it. Lists of ``(id, score)`` are in rank order.
    """

    qid: str
    utterance: str
    history: list[tuple[str, str]]
    ptkb_all: dict[str, str]
    resolved_utterance: str | None = None
    gold_ptkb: list[str] = field(default_factory=list)
    query: str | None = None
    initial_answer: str | None = None
    queries: list[str] = field(default_factory=list)
    ptkb: list[tuple[str, float]] = field(default_factory=list)
    candidates: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    reranked: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    ranking: list[tuple[str, float]] = field(default_factory=list)
    used: list[str] = field(default_factory=list)
    response: str = ""
    passage_texts: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)  # select_partition: the partitions retrieve searches

    @classmethod
    def from_turn(cls, turn: Turn, conversation: Conversation) -> TurnRecord:
        """The canonical context of a turn: previous utterances and canonical responses."""
        history = [(t.utterance, t.response or "") for t in conversation.history(turn.turn_id)]
        return cls(turn.qid, turn.utterance, history, dict(conversation.ptkb), turn.resolved_utterance,
                   list(turn.ptkb_provenance))

    @property
    def retrieval_queries(self) -> list[str]:
        """Generated queries (GtR) if any, else the single query."""
        return self.queries or [self.query or self.utterance]

    def ptkb_texts(self) -> list[str]:
        return [self.ptkb_all[key] for key, _ in self.ptkb if key in self.ptkb_all]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnRecord:
        record = cls(**data)
        record.history = [tuple(h) for h in record.history]  # type: ignore[misc]
        record.ptkb = [tuple(p) for p in record.ptkb]  # type: ignore[misc]
        record.candidates = {q: [tuple(h) for h in hits] for q, hits in record.candidates.items()}  # type: ignore[misc]
        record.reranked = {q: [tuple(h) for h in hits] for q, hits in record.reranked.items()}  # type: ignore[misc]
        record.ranking = [tuple(h) for h in record.ranking]  # type: ignore[misc]
        return record


def records_for(topics: Topics) -> list[TurnRecord]:
    """One record per turn, in topic order."""
    return [TurnRecord.from_turn(turn, topics.conversation_of(turn.qid)) for turn in topics]
