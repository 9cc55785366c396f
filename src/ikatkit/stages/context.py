"""Dialogue context selection: which previous turns the later stages look back at.

The document-level topic-shift method (RAG-oracle, RAG-cascade, RAG-limit, RAG-topic): a turn's context is
the earlier turns grounded in the same documents, known from gold data (``oracle``) or estimated by a cascade
over the passages each earlier turn was grounded in (``cascade``), or cut where consecutive utterances stop
being similar (``coherence``). ``select_context`` sets ``record.context_ids``; ``record.context_history`` then
gives every stage that looks back (rewrite, PTKB history, GtR and response prompts, ``context_query``) those
turns only.

A turn's selection depends only on its conversation up to that turn, never on the pipeline's batches: the
cascade re-derives the documents earlier turns were grounded in by retrieving for them itself (Algorithm 1,
with this run's searcher), memoised per conversation prefix, so a resumed run or another batch size selects
the same turns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ikatkit.capabilities import Ranker, Searcher, TextSearcher
from ikatkit.errors import IkatError
from ikatkit.pipelines.base import Stage
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.registry import register

METHODS = ("all", "last", "oracle", "oracle_qrels", "cascade", "cascade_limit", "coherence")
CHECKS = ("context", "utterance")
SCORERS = ("ranker", "lexical")  # the scored methods' scorer: the ranker resource, or TF-IDF cosine (no model)
GOLD_METHODS = ("oracle", "oracle_qrels")
SCORED_METHODS = ("cascade", "cascade_limit", "coherence")
RELEVANT = 2  # a passage judged at least this grade is relevant (binary measures, oracle_qrels)


def document_of(pid: str) -> str:
    """The ClueWeb22 document of a passage id ``doc:N``."""
    return pid.rpartition(":")[0] or pid


def check_options(stage: dict[str, Any], run_type: str = "automatic") -> None:
    """Reject a ``select_context`` stage's bad options (the config loader adds the file and stage)."""
    method = stage.get("method", "all")
    if method not in METHODS:
        raise IkatError(f'method = "{method}" is not a context selection method', fix=f"use one of {list(METHODS)}")
    threshold = stage.get("threshold", 0.5)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
        raise IkatError(f"threshold = {threshold!r} is outside [0, 1]",
                        fix="the scorer's score is mapped to [0, 1]; 0.5 is the paper's threshold")
    if stage.get("check", "context") not in CHECKS:
        raise IkatError(f'check = "{stage.get("check")}" is not a cascade check', fix=f"use one of {list(CHECKS)}")
    if stage.get("scorer", "ranker") not in SCORERS:
        raise IkatError(f'scorer = "{stage.get("scorer")}" is not a context scorer',
                        fix='use "ranker" (the ranker resource: bi-encoder cosine, cross-encoder probability) or '
                            '"lexical" (TF-IDF cosine over the searched index, no model)')
    for key in ("n", "passages"):
        value = stage.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise IkatError(f"{key} = {value!r} must be a positive integer", fix=f"e.g. {key} = 6")
    if method in GOLD_METHODS and run_type != "manual":
        raise IkatError(f'method = "{method}" reads gold provenance, so the run must be marked manual',
                        fix='set run_type = "manual" at the top of the config')
    if method == "oracle_qrels" and not stage.get("qrels"):
        raise IkatError('method = "oracle_qrels" needs qrels', fix='add qrels = "path/to/qrels.txt" to the stage')


def lexical_scorer(searcher: Searcher | None) -> Any:
    """TF-IDF cosine over the Lucene index a BM25 ``searcher`` searches (``scorer = "lexical"``)."""
    from ikatkit.rank.lexical import TfidfCosine
    from ikatkit.retrieve.bm25 import Bm25Searcher

    if not isinstance(searcher, Bm25Searcher):
        raise IkatError('scorer = "lexical" reads document frequencies from the Lucene index searched',
                        fix='declare a bm25 resource (and name it with searcher = "..." if several searchers fit)')
    return TfidfCosine(searcher.index)


def unit_scorer(ranker: Ranker) -> Any:
    """A function mapping the ranker's scores to [0, 1]: a cross-encoder's logits through a sigmoid (its
    probabilities, when the model applies one, as they are); a bi-encoder's cosine clipped at 0 and 1."""
    model = getattr(ranker, "model", None)
    logits = type(ranker).__name__ == "CrossEncoderRanker" and \
        type(getattr(model, "activation_fn", None)).__name__ != "Sigmoid"
    if logits:
        return lambda score: 1.0 / (1.0 + math.exp(-score))
    return lambda score: min(1.0, max(0.0, score))


def oracle_context(record: TurnRecord, qrels: dict[str, dict[str, int]] | None = None) -> list[str]:
    """The earlier turns whose provenance shares a document with the turn's own provenance (with ``qrels``:
    or cites a passage judged relevant for the turn). A turn without provenance shares none."""
    docs = {document_of(pid) for pid in record.provenance}
    judged = {pid for pid, grade in (qrels or {}).get(record.qid, {}).items() if grade >= RELEVANT}
    return [qid for qid, cited in zip(record.history_ids, record.history_provenance)
            if any(document_of(pid) in docs or pid in judged for pid in cited)]


def oracle_segments(provenance: Sequence[Sequence[str]]) -> int:
    """How many segments a conversation has: the connected groups of its turns with provenance, two turns
    joined when they cite a common document."""
    docs = [{document_of(pid) for pid in cited} for cited in provenance if cited]
    parent = list(range(len(docs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(docs)):
        for j in range(i):
            if docs[i] & docs[j]:
                parent[root(i)] = root(j)
    return len({root(i) for i in range(len(docs))})


@dataclass
class _Cascade:
    """Algorithm 1's state after some turns: their utterances, their groups (each the turns it holds and the
    passages those turns were grounded in, in first-seen order) and each turn's decision."""

    utterances: list[str] = field(default_factory=list)
    groups: list[tuple[list[int], list[str]]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def copy(self) -> _Cascade:
        return _Cascade(list(self.utterances), [(list(t), list(p)) for t, p in self.groups], list(self.decisions))


class Cascade:
    """The paper's cascade (Algorithm 1) with a passage-checking scorer = any ranker, scores mapped to [0, 1].

    Turns are taken in order. For each earlier group, the utterance plus the group's turns (``check =
    "context"``, the paper's input; ``"utterance"``: the utterance alone) is scored against each passage the
    group is grounded in; if the best group's best score is at least ``threshold``, the turn
    joins that group and its context is the group's turns; otherwise it starts a new group with no context.
    Either way the top ``passages`` BM25 passages for the utterance plus its context ground the turn: they
    join its group's passages. The paper's group is one document; here it is the documents its turns were
    grounded in, since an iKAT turn cites passages of several documents and one subject spans documents.
    """

    def __init__(self, searcher: TextSearcher, ranker: Ranker, threshold: float = 0.5, passages: int = 10,
                 check: str = "context") -> None:
        self.searcher, self.ranker, self.threshold, self.passages = searcher, ranker, threshold, passages
        self.check = check
        self.unit = unit_scorer(ranker)
        self._memo: dict[tuple[tuple[str, str], ...], _Cascade] = {(): _Cascade()}
        self._texts: dict[str, str] = {}  # grounded passages' texts, fetched once

    def run(self, turns: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """The decisions for a conversation's turns ``(qid, utterance)`` in order, from the longest known prefix."""
        turns = tuple(turns)
        done = max(i for i in range(len(turns) + 1) if turns[:i] in self._memo)
        state = self._memo[turns[:done]]
        for i in range(done, len(turns)):
            state = self._step(state, turns[i])
            self._memo[turns[: i + 1]] = state
        return state.decisions

    def _step(self, previous: _Cascade, turn: tuple[str, str]) -> _Cascade:
        qid, utterance = turn
        state = previous.copy()
        queries = [" ".join([utterance, *(state.utterances[k] for k in members if self.check == "context")])
                   for members, _ in state.groups]
        texts = self._texts
        keys = [(g, pid) for g, (_, pids) in enumerate(state.groups) for pid in pids if pid in texts]
        scores = self.ranker.score([(queries[g], texts[pid]) for g, pid in keys])
        best = [0.0] * len(state.groups)
        for (g, _), score in zip(keys, scores):
            best[g] = max(best[g], self.unit(float(score)))
        top = max(range(len(best)), key=lambda g: best[g], default=-1)  # the earliest of equals
        joined = top >= 0 and best[top] >= self.threshold
        if joined:
            members, grounded = state.groups[top]
        else:
            members, grounded = [], []
            state.groups.append((members, grounded))
        context = list(members)
        query = " ".join([utterance, *(state.utterances[k] for k in context)])
        found = [pid for pid, _ in self.searcher.search(query, self.passages) if pid not in grounded]
        self._texts.update(self.searcher.texts([pid for pid in found if pid not in self._texts]))
        grounded.extend(found)
        members.append(len(state.utterances))
        state.decisions.append({"qid": qid, "group": top if joined else len(state.groups) - 1, "joined": joined,
                                "score": best[top] if top >= 0 else 0.0,
                                "context": [state.decisions[k]["qid"] for k in context]})
        state.utterances.append(utterance)
        return state


@register
class SelectContext(Stage):
    """Choose each turn's dialogue context among its previous turns (``method``, see :data:`METHODS`).

    ``all`` keeps every previous turn; ``last`` the last ``n``; ``oracle`` those sharing a provenance document
    (``oracle_qrels``: or citing a passage the ``qrels`` judge relevant for the turn; both read gold data, so
    manual runs only); ``cascade`` the turns of the group Algorithm 1 joins (the scorer scores the
    ``check`` input, ``threshold``, ``passages`` per turn from ``searcher``), ``cascade_limit`` its last ``n``;
    ``coherence`` the turns since the last cut, a cut falling where consecutive utterances' score (in [0, 1]) is below
    ``threshold`` (the content-only RAG-topic baseline). The scorer (``scorer``) is the ``ranker`` resource
    (``"ranker"``) or TF-IDF cosine over the index ``searcher`` searches (``"lexical"``, no model:
    :class:`~ikatkit.rank.lexical.TfidfCosine`)."""

    name = "select_context"
    requires = ()
    provides = ("context_ids", "context_trace")

    def __init__(self, method: str = "all", n: int = 6, threshold: float = 0.5, passages: int = 10,
                 check: str = "context", scorer: str = "ranker", qrels: str | dict[str, dict[str, int]] | None = None,
                 ranker: Ranker | None = None, searcher: Searcher | None = None) -> None:
        check_options({"method": method, "n": n, "threshold": threshold, "passages": passages, "check": check,
                       "scorer": scorer, "qrels": qrels}, "manual")
        self.method, self.n, self.threshold = method, n, threshold
        if method in SCORED_METHODS and scorer == "lexical":
            ranker = lexical_scorer(searcher)
        if method in SCORED_METHODS and ranker is None:
            raise IkatError(f'method = "{method}" needs a scorer', fix="declare a bi-encoder or cross-encoder "
                            "resource and name it with ranker = \"...\", or set scorer = \"lexical\"")
        if method.startswith("cascade") and not isinstance(searcher, TextSearcher):
            raise IkatError(f'method = "{method}" retrieves for earlier turns', fix="declare a bm25 resource")
        self.ranker = ranker
        self.unit = unit_scorer(ranker) if ranker is not None else None
        self.cascade = None
        if method.startswith("cascade"):
            assert isinstance(searcher, TextSearcher) and ranker is not None  # both refused above
            self.cascade = Cascade(searcher, ranker, threshold, passages, check)
        self.qrels = None
        if method == "oracle_qrels":
            from ikatkit.evaluate.qrels import load_qrels

            self.qrels = qrels if isinstance(qrels, dict) else load_qrels(qrels or "")

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        check_options(options, run_type)

    def check_records(self, records: Sequence[TurnRecord]) -> None:
        """Gold methods need topics with provenance: say so before any batch runs."""
        if self.method in GOLD_METHODS and records and not any(r.provenance for r in records):
            raise IkatError(f'method = "{self.method}" reads response_provenance, and no turn of these topics '
                            "has any", fix="use topics released with provenance, or an automatic method")

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.context_ids, record.context_trace = self.select(record)
        return records

    def select(self, record: TurnRecord) -> tuple[list[str], dict[str, Any]]:
        """The previous turns' ids kept for ``record`` and the trace of the decision."""
        ids = list(record.history_ids)
        if self.method == "all":
            return ids, {"method": "all"}
        if self.method == "last":
            return ids[-self.n:], {"method": "last", "n": self.n}
        if self.method in GOLD_METHODS:
            return oracle_context(record, self.qrels), {"method": self.method}
        if self.method == "coherence":
            return self._coherence(record)
        assert self.cascade is not None
        decisions = self.cascade.run(list(zip(ids + [record.qid], [u for u, _ in record.history] + [record.utterance])))
        kept = decisions[-1]["context"]
        if self.method == "cascade_limit":
            kept = kept[-self.n:]
        trace = {"method": self.method, "group": decisions[-1]["group"], "joined": decisions[-1]["joined"],
                 "score": decisions[-1]["score"], "groups": {d["qid"]: d["group"] for d in decisions}}
        return kept, trace

    def _coherence(self, record: TurnRecord) -> tuple[list[str], dict[str, Any]]:
        utterances = [u for u, _ in record.history] + [record.utterance]
        pairs = list(zip(utterances, utterances[1:]))
        assert self.unit is not None and self.ranker is not None  # __init__ refuses coherence without a ranker
        similarity = [self.unit(float(s)) for s in self.ranker.score(pairs)] if pairs else []
        start = max((k + 1 for k, s in enumerate(similarity) if s < self.threshold), default=0)
        return record.history_ids[start:], {"method": "coherence", "similarity": similarity}


def context_query(record: TurnRecord) -> str:
    """The utterance followed by the selected previous turns' utterances (the paper's retrieval input)."""
    return " ".join([record.utterance, *(u for u, _ in record.context_history)])


@register
class ContextQuery(Stage):
    """Query = the utterance plus the selected turns' utterances (all previous ones without ``select_context``):
    the paper's query, with no LLM."""

    name = "context_query"
    requires = ()
    ordered = ("context_ids",)
    provides = ("query",)

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.query = context_query(record)
        return records
