"""The record one turn carries through a pipeline: every stage's output is kept on it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ikatkit.topics import Conversation, Topics, Turn


@dataclass
class TurnRecord:
    """A turn and what the stages made of it.

    ``query`` is the text retrieval uses (the rewrite, or the resolved utterance in a manual run);
    the raw ``utterance`` stays beside it. Lists of ``(id, score)`` are in rank order. ``rejected`` keeps, by
    stage, an LLM output the guards (``ikatkit.llm.guards``) refused; ``notes`` says what was used instead.
    ``history_ids`` are the query ids of the ``history`` turns and ``history_provenance`` their
    ``response_provenance`` (gold data, like ``provenance``, the turn's own); ``context_ids`` are the previous
    turns ``select_context`` kept (``None`` when it did not run) and ``context_trace`` its decisions. ``sources`` is the
    source plan (``plan_sources``; see :meth:`uses`), ``ptkb_used`` the PTKB keys the response prompt carried (as
    ``used`` names its passages). ``ptkb_trace`` keeps a trained PTKB model's probability of every statement, its
    threshold and its training data's fingerprint (:mod:`ikatkit.rank.ptkb_model`).
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
    rejected: dict[str, str] = field(default_factory=dict)
    history_ids: list[str] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)
    history_provenance: list[list[str]] = field(default_factory=list)
    context_ids: list[str] | None = None
    context_trace: dict[str, Any] = field(default_factory=dict)
    refinement: dict[str, Any] = field(default_factory=dict)
    partitions: list[int] = field(default_factory=list)  # select_partition: the partitions retrieve searches
    memory: str = ""  # refine_memory: the condensed passages respond answers from ("" = the passages themselves)
    memory_trace: dict[str, Any] = field(default_factory=dict)  # refine_memory: every candidate and the choice
    sources: list[str] | None = None  # plan_sources: "ptkb" / "passages" the response needs ([] = NULL; None = all)
    plan: dict[str, Any] = field(default_factory=dict)  # plan_sources: planner, scores, decision, fallback
    ptkb_used: list[str] = field(default_factory=list)  # respond / refine_evidence: the statements in the prompt
    evidence: dict[str, Any] = field(default_factory=dict)  # refine_evidence: the trace of its rounds
    user_id: str = ""  # the simulated user's id (interactive runs); track_persona keys its store by it
    ptkb_trace: dict[str, Any] = field(default_factory=dict)  # rank_ptkb / classify_ptkb with a trained model

    @classmethod
    def from_turn(cls, turn: Turn, conversation: Conversation) -> TurnRecord:
        """The canonical context of a turn: previous utterances and canonical responses."""
        previous = conversation.history(turn.turn_id)
        return cls(turn.qid, turn.utterance, [(t.utterance, t.response or "") for t in previous],
                   dict(conversation.ptkb), turn.resolved_utterance, list(turn.ptkb_provenance),
                   history_ids=[t.qid for t in previous], provenance=list(turn.response_provenance),
                   history_provenance=[list(t.response_provenance) for t in previous])

    @property
    def context_history(self) -> list[tuple[str, str]]:
        """The previous turns later stages look back at: those ``select_context`` kept, else all of them."""
        if self.context_ids is None:
            return self.history
        keep = set(self.context_ids)
        return [turn for qid, turn in zip(self.history_ids, self.history) if qid in keep]

    @property
    def retrieval_queries(self) -> list[str]:
        """Generated queries (GtR) if any, else the single query."""
        return self.queries or [self.query or self.utterance]

    def uses(self, source: str) -> bool:
        """Whether the source plan lets the response use ``source`` ("ptkb" or "passages"); no plan: every source."""
        return self.sources is None or source in self.sources

    def ptkb_texts(self) -> list[str]:
        return [self.ptkb_all[key] for key, _ in self.ptkb if key in self.ptkb_all]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnRecord:
        record = cls(**data)
        record.history = _tuples(record.history)
        record.ptkb = _tuples(record.ptkb)
        record.candidates = {q: _tuples(hits) for q, hits in record.candidates.items()}
        record.reranked = {q: _tuples(hits) for q, hits in record.reranked.items()}
        record.ranking = _tuples(record.ranking)
        return record


def _tuples(items: Iterable[Sequence[Any]]) -> list[Any]:
    """JSON's lists back to the tuples a field holds (pairs as ``to_json`` wrote them; JSON keeps no tuple type)."""
    return [tuple(item) for item in items]


def records_for(topics: Topics) -> list[TurnRecord]:
    """One record per turn, in topic order."""
    return [TurnRecord.from_turn(turn, topics.conversation_of(turn.qid)) for turn in topics]
