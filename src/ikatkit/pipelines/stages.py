"""Pipeline stages: each is one ``transform`` over a batch of turn records.

RtG, GtR and the manual run are lists of these stages in a config (see ``configs/``). Stages only
read and write fields of :class:`TurnRecord`, so a run can be explained and compared stage by stage.
"""

from __future__ import annotations

from typing import Any, Protocol

from ikatkit.partition.stage import SelectPartition
from ikatkit.pipelines.record import TurnRecord
from ikatkit.rank.base import rank_ptkb


class Stage(Protocol):
    name: str

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]: ...


def _context(record: TurnRecord) -> dict[str, Any]:
    """Prompt variables shared by every task: the canonical context, the PTKB, the question."""
    return {
        "history": record.history,
        "utterance": record.utterance,
        "query": record.query or record.utterance,
        "ptkb": record.ptkb_texts() or list(record.ptkb_all.values()),
        "all_ptkb": list(record.ptkb_all.items()),
    }


def _chat(llm: Any, task: str, variables: list[dict[str, Any]]) -> list[str]:
    from ikatkit.llm.prompts import render

    return llm.chat([render(task, **v) for v in variables]) if variables else []


class RawQuery:
    """Query = the raw utterance (a baseline)."""

    name = "raw_query"

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.query = record.utterance
        return records


class ManualQuery:
    """Query = the resolved utterance (the manual run), raw where it is empty."""

    name = "manual_query"

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.query = record.resolved_utterance or record.utterance
            if not record.resolved_utterance:
                record.notes.append("empty resolved_utterance: raw utterance used")
        return records


class Rewrite:
    """LLM rewrite of the utterance from all previous utterances and the last canonical response."""

    name = "rewrite"

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        from ikatkit.llm.parse import parse_rewrite

        outputs = _chat(self.llm, "rtg_rewrite", [_context(r) for r in records])
        for record, output in zip(records, outputs):
            record.query = parse_rewrite(output)
            if not record.query:
                record.query = record.utterance
                record.notes.append("empty rewrite: raw utterance used")
                self.llm.count_fallback()
        return records


class RankPtkb:
    """Rank the conversation's PTKB statements against the query; keep the top ``k``.

    ``history_turns`` > 0 adds ``history_weight`` times each statement's best score against the previous
    utterances (up to that many) of the conversation, so a statement the conversation is about stays on top
    (3 turns, 0.3 with MiniLM-L6 on iKAT 2023 PTKB qrels: raw utterance nDCG@5 0.6948 -> 0.7225)."""

    name = "rank_ptkb"

    def __init__(self, ranker: Any, k: int = 3, history_turns: int = 0, history_weight: float = 0.3) -> None:
        self.ranker, self.k, self.history_turns, self.history_weight = ranker, k, history_turns, history_weight

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            history = [u for u, _ in record.history][-self.history_turns:] if self.history_turns > 0 else []
            ranked = rank_ptkb(self.ranker, record.query or record.utterance, record.ptkb_all, self.k, history,
                               self.history_weight)
            record.ptkb = [(key, float(s)) for key, s in ranked]
        return records


class GoldPtkb:
    """The topics' PTKB provenance (manual runs), score 1 each, in the topics' order."""

    name = "gold_ptkb"

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.ptkb = [(key, 1.0) for key in record.gold_ptkb]
        return records


class ClassifyPtkb:
    """LLM classification of each PTKB statement as relevant or not (GtR); relevant ones score 1."""

    name = "classify_ptkb"

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        from ikatkit.llm.parse import parse_ptkb_classification

        variables = [dict(_context(r), response=r.response) for r in records]
        for record, output in zip(records, _chat(self.llm, "ptkb_classify", variables)):
            keys = parse_ptkb_classification(output, list(record.ptkb_all))
            record.ptkb = [(key, 1.0) for key in keys]
        return records


class Retrieve:
    """BM25 for each retrieval query, optionally expanded with the selected PTKB statements."""

    name = "retrieve"

    def __init__(self, searcher: Any, k: int = 100, expand_ptkb: bool = True) -> None:
        self.searcher, self.k, self.expand_ptkb = searcher, k, expand_ptkb

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        texts: dict[str, str] = {}
        for record in records:
            suffix = " ".join(record.ptkb_texts()) if self.expand_ptkb else ""
            for i, query in enumerate(record.retrieval_queries):
                texts[f"{record.qid}\t{i}"] = f"{query} {suffix}".strip()
        chosen = {f"{r.qid}\t{i}": r.partitions for r in records for i in range(len(r.retrieval_queries))}
        restrict = {"partitions": chosen} if any(chosen.values()) else {}  # after select_partition
        hits = self.searcher.batch_search(texts, self.k, **restrict)
        for record in records:
            record.candidates = {q: [(h.docid, float(h.score)) for h in hits[f"{record.qid}\t{i}"]]
                                 for i, q in enumerate(record.retrieval_queries)}
            if len(record.candidates) == 1:
                record.ranking = next(iter(record.candidates.values()))
        return records


class Rerank:
    """Re-rank each query's candidates with a (bi- or cross-encoder) ranker against that query."""

    name = "rerank"

    def __init__(self, ranker: Any, searcher: Any, k: int | None = None) -> None:
        self.ranker, self.texts, self.k = ranker, searcher.texts, k

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            ids = sorted({pid for hits in record.candidates.values() for pid, _ in hits})
            texts = self.texts(ids)
            lists = {q: {pid: texts.get(pid, "") for pid, _ in hits} for q, hits in record.candidates.items()}
            record.reranked = {q: [(pid, float(s)) for pid, s in ranked]
                               for q, ranked in self.ranker.rank_many(lists, self.k).items()}
            if len(record.reranked) == 1:
                record.ranking = next(iter(record.reranked.values()))
        return records


class Fuse:
    """Merge the per-query rankings: round-robin ``interleave`` with dedupe (the paper's GtR) or ``rrf``."""

    name = "fuse"

    def __init__(self, method: str = "interleave", k: int = 1000) -> None:
        from ikatkit.retrieve import fusion

        self.fuse = {"interleave": fusion.interleave, "rrf": fusion.rrf}[method]
        self.k = k

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            lists = list((record.reranked or record.candidates).values())
            record.ranking = [(pid, float(s)) for pid, s in self.fuse(lists, self.k)]
        return records


class GenerateAnswer:
    """GtR step 1: the LLM answers from context and PTKB alone (<= 200 words)."""

    name = "generate_answer"

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record, output in zip(records, _chat(self.llm, "gtr_answer", [_context(r) for r in records])):
            record.initial_answer = output.strip()
        return records


class GenerateQueries:
    """GtR step 2: up to ``n`` search queries from the initial answer; the query itself when none parse."""

    name = "generate_queries"

    def __init__(self, llm: Any, n: int = 5) -> None:
        self.llm, self.n = llm, n

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        from ikatkit.llm.parse import parse_queries

        variables = [dict(_context(r), answer=r.initial_answer or "", n=self.n) for r in records]
        for record, output in zip(records, _chat(self.llm, "gtr_queries", variables)):
            record.queries = parse_queries(output, limit=self.n)
            if not record.queries:
                record.queries = [record.query or record.utterance]
                record.notes.append("no generated query: the utterance used")
                self.llm.count_fallback()
        return records


class Respond:
    """The response from the top ``passages`` passages (marked used) and the selected PTKB statements.

    ``task`` names the prompt (``rtg_response``, ``gtr_response``); ``extractive`` answers with the top
    passage's text instead of calling an LLM (a retrieval-only baseline). An empty LLM output falls back
    to the top passage too, noted on the record. Responses are cut to ``max_words`` (the track trims at 250).
    """

    name = "respond"

    def __init__(self, searcher: Any, llm: Any | None = None, task: str = "rtg_response", passages: int = 3,
                 ptkb: int = 3, max_words: int = 250) -> None:
        self.llm, self.texts, self.task = llm, searcher.texts, task
        self.passages, self.ptkb, self.max_words = passages, ptkb, max_words

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.used = [pid for pid, _ in record.ranking[: self.passages]]
            record.passage_texts = self.texts(record.used)
        if self.task == "extractive":
            outputs = [r.passage_texts.get(r.used[0], "") if r.used else "" for r in records]
        else:
            variables = [dict(_context(r), ptkb=r.ptkb_texts()[: self.ptkb],
                              passages=[r.passage_texts.get(pid, "") for pid in r.used]) for r in records]
            outputs = _chat(self.llm, self.task, variables)
        for record, output in zip(records, outputs):
            if not output.strip() and record.used:
                output = record.passage_texts.get(record.used[0], "")
                record.notes.append("empty LLM response: top passage used")
            record.response = " ".join(output.split()[: self.max_words])
        return records


STAGES: dict[str, type] = {cls.name: cls for cls in (RawQuery, ManualQuery, Rewrite, RankPtkb, GoldPtkb, ClassifyPtkb,
                                                     Retrieve, Rerank, Fuse, GenerateAnswer, GenerateQueries, Respond,
                                                     SelectPartition)}

