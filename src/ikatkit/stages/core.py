"""Pipeline stages: each is one ``transform`` over a batch of turn records.

RtG, GtR and the manual run are lists of these stages in a config (see ``configs/``). Stages only
read and write fields of :class:`TurnRecord`, so a run can be explained and compared stage by stage.

Each stage declares its contract as class attributes naming record fields (``requires``, ``ordered``,
``optional``, ``provides``: :mod:`ikatkit.pipelines.base`) and registers itself (:func:`register`); ``load_config``
checks the order and the runner what each stage wrote. Candidates are keyed by retriever and query
(:func:`candidate_key`), so two retrieve stages add lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ikatkit.capabilities import ChatLLM, Ranker, Searcher, expands_ptkb
from ikatkit.index.texts import TextsFunction
from ikatkit.errors import IkatError
from ikatkit.pipelines.base import (StagePosition, Stage, candidate_key, chat, check_mappings, evidence_variables,
                                    prompt_context, query_of, reject, top_text)
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.registry import STAGES, register  # noqa: F401  (STAGES: importable here as before)
from ikatkit.rank.base import PTKB_HISTORY_WEIGHT, history_texts, rank_ptkb
from ikatkit.retrieve import fusion


@register
class RawQuery(Stage):
    """Query = the raw utterance (a baseline)."""

    name = "raw_query"
    requires = ()
    provides = ("query",)

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.query = record.utterance
        return records


@register
class ManualQuery(Stage):
    """Query = the resolved utterance (the manual run), raw where it is empty."""

    name = "manual_query"
    requires = ()
    provides = ("query",)

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.query = record.resolved_utterance or record.utterance
            if not record.resolved_utterance:
                record.notes.append("empty resolved_utterance: raw utterance used")
        return records


@register
class FileQuery(Stage):
    """Query = the turn's line in a ``qid<TAB>text`` file (own or distributed rewrites); every turn must have one."""

    name = "file_query"
    requires = ()
    provides = ("query",)

    def __init__(self, path: str, sha256: str | None = None) -> None:
        from ikatkit.pipelines.queries import query_file

        found = query_file(path)
        if sha256 is not None and found.sha256 != sha256:
            raise IkatError("the query file changed since the run started", path=path,
                            fix="restore it, or start over with --restart (or a new --out)")
        self.path, self.queries = path, found.queries

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        missing = [r.qid for r in records if r.qid not in self.queries]
        if missing:
            raise IkatError(f"no query for {len(missing)} turn(s) of this batch, e.g. {missing[:3]}", path=self.path,
                            fix="add a 'qid<TAB>text' line for every turn, or pass --conversations to run fewer")
        for record in records:
            record.query = self.queries[record.qid]
        return records


@register
class Rewrite(Stage):
    """LLM rewrite of the utterance from all previous utterances and the last canonical response.

    The raw utterance is used instead when the guards reject the rewrite (empty, role tags or the prompt in
    it, a copy of an earlier utterance, an answer instead of a question), noted on the record. ``task`` names
    the prompt: ``rtg_rewrite`` (the seed paper's, one user message) or ``rtg_rewrite_chat`` (a system message
    and two few-shot turns, one line out: what keeps a very small model such as the demo's on topic)."""

    name = "rewrite"
    requires = ()
    ordered = ("context_ids",)
    provides = ("query",)
    TASKS = ("rtg_rewrite", "rtg_rewrite_chat")

    def __init__(self, llm: ChatLLM, task: str = "rtg_rewrite") -> None:
        self.check({"task": task})
        self.llm, self.task = llm, task

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        if options.get("task", "rtg_rewrite") not in cls.TASKS:
            raise IkatError(f"unknown rewrite task {options['task']!r}", where="task", fix=f"use one of {cls.TASKS}")

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        from ikatkit.llm.guards import check_rewrite
        from ikatkit.llm.parse import parse_rewrite

        outputs = chat(self.llm, self.task, [prompt_context(r) for r in records])
        for record, output in zip(records, outputs):
            record.query = parse_rewrite(output)
            problem = check_rewrite(record.query, record.utterance, record.history)
            if problem:
                reject(record, self.llm, self.name, output, f"{problem}: raw utterance used")
                record.query = record.utterance
        return records


@register
class RankPtkb(Stage):
    """Rank the conversation's PTKB statements against the query; keep the top ``k``.

    ``history_turns`` > 0 adds ``history_weight`` times each statement's best score against the previous raw
    utterances (up to that many) of the conversation, so a statement the conversation is about stays on top.
    With MiniLM-L6, 2 turns and 0.8 were chosen on the 2023 train topics for raw-utterance queries (test, NIST
    PTKB qrels, all statements ranked: nDCG@5 0.6948 -> 0.7548); with resolved utterances history barely helps
    (bench/tune_ptkb_history.py). ``history_responses`` > 0 adds the previous responses (up to that many; the
    canonical ones of a topic file, the system's own in an interactive run) to those texts: on the 2023 train
    topics, 2 responses and no utterance at 0.8 ranked best (raw utterances; test nDCG@5 0.7601, see
    docs/ptkb-classification.md). With ``classifier`` (a file of ``ikatkit train-ptkb-classifier``) the score is
    the trained model's probability (:mod:`ikatkit.rank.ptkb_model`; every statement's is kept in
    ``ptkb_trace``)."""

    name = "rank_ptkb"
    requires = ()
    ordered = ("query", "context_ids")
    provides = ("ptkb", "ptkb_trace")
    summary_key = "rank_ptkb_model"

    def __init__(self, ranker: Ranker, k: int = 3, history_turns: int = 0,
                 history_weight: float = PTKB_HISTORY_WEIGHT, classifier: str | None = None,
                 history_responses: int = 0) -> None:
        from ikatkit.rank.ptkb_model import PtkbModel

        self.check({"history_turns": history_turns, "classifier": classifier, "history_responses": history_responses})
        self.ranker, self.k, self.history_turns, self.history_weight = ranker, k, history_turns, history_weight
        self.history_responses = history_responses
        self.model = PtkbModel.load(classifier) if classifier else None

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        for option in ("history_turns", "history_responses"):
            if options.get("classifier") and options.get(option):
                raise IkatError(f"{option} and classifier both given", where=option,
                                fix=f"drop {option}: the trained model reads the earlier turns itself")

    @classmethod
    def check_placement(cls, options: dict[str, Any], placement: StagePosition) -> None:
        if options.get("classifier"):
            from ikatkit.rank.ptkb_model import load_for_ranker

            load_for_ranker(options["classifier"], placement.kinds.get("ranker"))

    @classmethod
    def summary(cls, records: Sequence[TurnRecord], seconds: float | None) -> dict[str, Any] | None:
        from ikatkit.rank.ptkb_model import summary

        return summary(records, cls.name)

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        if self.model is not None:
            from ikatkit.rank.ptkb_model import record_turn

            for record in records:
                ranked = self.model.ranked(self.ranker, record_turn(record))
                record.ptkb = ranked[: self.k] if self.k else ranked
                record.ptkb_trace = self.model.trace(self.name, dict(ranked))
            return records
        for record in records:
            history = history_texts(record.context_history, self.history_turns, self.history_responses)
            ranked = rank_ptkb(self.ranker, record.query or record.utterance, record.ptkb_all, self.k, history,
                               self.history_weight)
            record.ptkb = [(key, float(s)) for key, s in ranked]
        return records


@register
class GoldPtkb(Stage):
    """The topics' PTKB provenance (manual runs), score 1 each, in the topics' order."""

    name = "gold_ptkb"
    requires = ()
    provides = ("ptkb",)

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.ptkb = [(key, 1.0) for key in record.gold_ptkb]
        return records


@register
class ClassifyPtkb(Stage):
    """Choose the PTKB statements relevant to each turn (GtR): by the LLM, or with ``classifier`` by a trained
    model over the ranker's scores of the statements against the query and the conversation.

    The LLM judges each statement; chosen ones score 1. A ``classifier`` (a file of ``ikatkit
    train-ptkb-classifier``) keeps the statements whose probability reaches its threshold, scored by that
    probability; every statement's probability is kept in ``ptkb_trace`` (:mod:`ikatkit.rank.ptkb_model`,
    docs/ptkb-classification.md)."""

    name = "classify_ptkb"
    requires = ()
    ordered = ("context_ids",)
    provides = ("ptkb", "ptkb_trace")
    summary_key = "classify_ptkb_model"

    def __init__(self, llm: ChatLLM | None = None, ranker: Ranker | None = None, classifier: str | None = None) -> None:
        from ikatkit.rank.ptkb_model import PtkbModel

        self.llm, self.ranker = llm, ranker
        self.classifier = PtkbModel.load(classifier) if classifier else None

    @classmethod
    def ordered_reads(cls, options: dict[str, Any]) -> tuple[str, ...]:
        return ("query", "context_ids") if options.get("classifier") else cls.ordered

    @classmethod
    def check_placement(cls, options: dict[str, Any], placement: StagePosition) -> None:
        """An LLM without ``classifier``; with it, a ranker of the kind the classifier was trained on."""
        if not options.get("classifier"):
            if placement.kinds.get("llm") is None:
                raise IkatError("classify_ptkb needs an LLM resource, or a trained classifier", where="classifier",
                                fix='declare a kind = "llm" resource, or add classifier = "<file>" and a bi-encoder')
            return
        from ikatkit.rank.ptkb_model import load_for_ranker

        load_for_ranker(options["classifier"], placement.kinds.get("ranker"))

    @classmethod
    def summary(cls, records: Sequence[TurnRecord], seconds: float | None) -> dict[str, Any] | None:
        from ikatkit.rank.ptkb_model import summary

        return summary(records, cls.name)

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        if self.classifier is not None:
            assert self.ranker is not None  # check_placement refuses a classifier without its ranker
            from ikatkit.rank.ptkb_model import record_turn

            for record in records:
                ranked = self.classifier.ranked(self.ranker, record_turn(record))
                record.ptkb = self.classifier.choose(ranked)
                record.ptkb_trace = self.classifier.trace(self.name, dict(ranked))
            return records
        from ikatkit.llm.parse import parse_ptkb_classification

        variables = [dict(prompt_context(r), response=r.response) for r in records]
        assert self.llm is not None  # check_placement refuses this stage without an LLM or a classifier
        for record, output in zip(records, chat(self.llm, "ptkb_classify", variables)):
            keys = parse_ptkb_classification(output, list(record.ptkb_all))
            record.ptkb = [(key, 1.0) for key in keys]
        return records


@register
class Retrieve(Stage):
    """Search each retrieval query, optionally expanded with the selected PTKB statements (``expand_ptkb``; unset:
    the searcher's default, its class's ``expands_ptkb`` (:func:`ikatkit.capabilities.expands_ptkb`): BM25 appends
    them, as the UvA runs do; dense and learned sparse encoders, trained on short queries, search the query alone).

    ``searcher`` is any resource with ``batch_search(texts, k)`` and ``texts(ids)`` (BM25, dense). Its lists are
    added to the record's candidates under :func:`candidate_key` (resource name, query), beside those of
    earlier retrieve stages; with a single list in all it is also the ranking. When none of a turn's generated
    (GtR) queries retrieves anything, their empty lists give way to the turn's own query's, noted on the record.
    """

    name = "retrieve"
    requires = ()
    ordered = ("queries", "query", "partitions", "ptkb")
    provides = ("candidates",)
    single_list_provides = ("ranking",)

    def __init__(self, searcher: Searcher, k: int = 100, expand_ptkb: bool | None = None) -> None:
        self.searcher, self.k = searcher, k
        self.expand_ptkb = expands_ptkb(searcher) if expand_ptkb is None else expand_ptkb
        self.resource_names: dict[str, str] = {}  # set by build_stages: {"searcher": resource name}

    @classmethod
    def ordered_reads(cls, options: dict[str, Any]) -> tuple[str, ...]:
        """The PTKB is read only when it may expand the queries (unset: the searcher's default may)."""
        return tuple(f for f in cls.ordered if f != "ptkb" or options.get("expand_ptkb") is not False)

    @classmethod
    def check_placement(cls, options: dict[str, Any], placement: StagePosition) -> None:
        """After ``select_partition`` the searcher must search within the chosen partitions."""
        from ikatkit.pipelines.resources import searcher_takes

        kind = placement.kinds.get("searcher")
        if "partitions" in placement.before and not searcher_takes(kind, "partitions"):
            raise IkatError(f"retrieve searches {options.get('searcher')!r}, a {kind!r} resource, after "
                            "select_partition chose partitions: only a partitioned-bm25 searcher searches within them",
                            fix="name the partitioned-bm25 resource as this retrieve's searcher, or drop "
                                "select_partition")

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        retriever = self.resource_names.get("searcher", "searcher")
        searches = {(r.qid, i): query for r in records for i, query in enumerate(r.retrieval_queries)}
        self._search(records, searches, retriever)
        fallback = {(r.qid, -1): r.query or r.utterance for r in records if r.queries and not any(
            r.candidates[candidate_key(retriever, q)] for q in r.queries) and (r.query or r.utterance) not in r.queries}
        if fallback:  # GtR: no generated query retrieved anything, the turn's own query is searched instead
            for record in (r for r in records if (r.qid, -1) in fallback):
                for query in record.queries:  # a query listed twice has one list
                    record.candidates.pop(candidate_key(retriever, query), None)
                record.notes.append("generated queries retrieved nothing: the turn's query searched")
            self._search(records, fallback, retriever)
        for record in records:
            record.ranking = next(iter(record.candidates.values())) if len(record.candidates) == 1 else []
        return records

    def _search(self, records: list[TurnRecord], searches: dict[tuple[str, int], str], retriever: str) -> None:
        """Search ``{(qid, i): query}`` in one batch (PTKB-expanded, in the turn's partitions) into candidates."""
        from ikatkit.retrieve.search import search

        by_qid = {r.qid: r for r in records}
        texts, chosen = {}, {}
        for (qid, i), query in searches.items():
            suffix = " ".join(by_qid[qid].ptkb_texts()) if self.expand_ptkb else ""
            texts[f"{qid}\t{i}"] = f"{query} {suffix}".strip()
            chosen[f"{qid}\t{i}"] = by_qid[qid].partitions  # after select_partition
        found = search(self.searcher, texts, self.k, chosen)
        for (qid, i), query in searches.items():
            by_qid[qid].candidates[candidate_key(retriever, query)] = found[f"{qid}\t{i}"]


@register
class Rerank(Stage):
    """Re-rank each query's candidates with a (bi- or cross-encoder) ranker against that query; ``depth`` re-ranks
    only the first ``depth`` candidates (the rest follow in retrieval order: a cross-encoder's cost grows with the
    candidates it scores), ``k`` keeps the top k."""

    name = "rerank"
    requires = ("candidates",)
    provides = ("reranked",)
    single_list_provides = ("ranking",)

    def __init__(self, ranker: Ranker, texts: TextsFunction, k: int | None = None, depth: int | None = None) -> None:
        self.check({"k": k, "depth": depth})
        self.ranker, self.texts, self.k, self.depth = ranker, texts, k, depth

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        for key in ("k", "depth"):
            if options.get(key) is not None and options[key] < 1:
                raise IkatError(f"{key} = {options[key]} is not a positive count", where=key,
                                fix=f"give {key} >= 1, or leave it out for all candidates")

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        from ikatkit.rank.rerank import rerank_lists

        for record in records:
            texts = self.texts(sorted({pid for hits in record.candidates.values() for pid, _ in hits[:self.depth]}))
            lists = {key: (query_of(key), [pid for pid, _ in hits]) for key, hits in record.candidates.items()}
            record.reranked = rerank_lists(self.ranker, lists, texts, self.k, self.depth)
            if len(record.reranked) == 1:
                record.ranking = next(iter(record.reranked.values()))
        return records


@register
class Fuse(Stage):
    """Merge the per-query rankings: round-robin ``interleave`` with dedupe (the paper's GtR), ``rrf``, or
    ``weighted`` (the sum of ``weights`` times each ranking's scores normalised by ``normalisation``, minmax or
    zscore: hybrid BM25 + dense)."""

    name = "fuse"
    requires = ("candidates",)
    ordered = ("reranked",)
    provides = ("ranking",)

    METHODS, NORMALISATIONS = fusion.METHODS, fusion.NORMALISATIONS

    def __init__(self, method: str = "interleave", k: int = 1000, weights: list[float] | None = None,
                 normalisation: str = "minmax") -> None:
        self.check({"method": method, "normalisation": normalisation})
        self.fuse = fusion.fuser(method, weights, normalisation)
        self.k = k

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        """Reject a config's options before anything loads (called by ``load_config``)."""
        if options.get("method", "interleave") not in cls.METHODS:
            raise IkatError(f"unknown fusion method {options['method']!r}", where="method",
                            fix=f"use one of {cls.METHODS}")
        if options.get("normalisation", "minmax") not in cls.NORMALISATIONS:
            raise IkatError(f"unknown normalisation {options['normalisation']!r}", where="normalisation",
                            fix=f"use one of {cls.NORMALISATIONS}")

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            lists = list((record.reranked or record.candidates).values())
            record.ranking = [(pid, float(s)) for pid, s in self.fuse(lists, k=self.k)]
        return records


@register
class GenerateAnswer(Stage):
    """GtR step 1: the LLM answers from context and PTKB alone (<= 200 words)."""

    name = "generate_answer"
    requires = ()
    ordered = ("context_ids",)
    optional = ("ptkb",)  # before classify_ptkb it answers from every statement (GtR)
    provides = ("initial_answer",)

    def __init__(self, llm: ChatLLM) -> None:
        self.llm = llm

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        from ikatkit.llm.guards import check_response

        for record, output in zip(records, chat(self.llm, "gtr_answer", [prompt_context(r) for r in records])):
            problem = check_response(output)
            record.initial_answer = "" if problem else output.strip()
            if problem:
                reject(record, self.llm, self.name, output, f"{problem}: queries generated without an answer")
        return records


@register
class GenerateQueries(Stage):
    """GtR step 2: up to ``n`` search queries from the initial answer; the query itself when none parse or
    the guards reject them (the prompt echoed, several lines that are all one query)."""

    name = "generate_queries"
    requires = ("initial_answer",)
    ordered = ("query",)
    provides = ("queries",)

    def __init__(self, llm: ChatLLM, n: int = 5) -> None:
        self.llm, self.n = llm, n

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        from ikatkit.llm.guards import check_queries
        from ikatkit.llm.parse import parse_queries

        variables = [dict(prompt_context(r), answer=r.initial_answer or "", n=self.n) for r in records]
        for record, output in zip(records, chat(self.llm, "gtr_queries", variables)):
            record.queries = parse_queries(output, limit=self.n)
            problem = check_queries(record.queries, output)
            if problem:
                reject(record, self.llm, self.name, output, f"{problem}: the turn's query used")
                record.queries = [record.query or record.utterance]
        return records


@register
class Respond(Stage):
    """The response from the top ``passages`` passages (marked used) and the top ``ptkb`` PTKB statements
    (``ptkb_used``), as the source plan allows (``plan_sources``: a source it rules out is left out of the prompt).

    ``task`` names the prompt (``rtg_response``, ``gtr_response``); ``extractive`` answers with the top
    passage's text instead of calling an LLM (a retrieval-only baseline). An LLM output the guards reject
    (empty, only a heading, the prompt template echoed, a loop) falls back to the top passage too, noted on the
    record; one that loops after a usable answer (grounded in the passages) is cut before the loop instead (noted;
    the whole output kept in ``rejected``, so what was cut is on the record). Responses are cut to ``max_words``
    (the track trims at 250). ``similarity_tokens`` writes each statement's and passage's ranker score into the
    prompt as UniMS-RAG's similarity token (0.1 ... 1.0), mapped to [0, 1] by ``ptkb_similarity`` /
    ``passage_similarity`` (cosine: bi-encoder, sigmoid: cross-encoder, minmax: BM25;
    :mod:`ikatkit.pipelines.similarity`). After ``refine_memory`` the LLM reads the turn's refined memory instead
    of the passages (still marked used: the memory condenses them).
    """

    name = "respond"
    requires = ("ranking",)
    ordered = ("query", "context_ids", "ptkb", "sources", "memory")
    provides = ("used", "ptkb_used", "passage_texts", "response")

    def __init__(self, texts: TextsFunction, llm: ChatLLM | None = None, task: str = "rtg_response", passages: int = 3,
                 ptkb: int = 3, max_words: int = 250, similarity_tokens: bool = False,
                 ptkb_similarity: str = "cosine", passage_similarity: str = "cosine") -> None:
        self.llm, self.texts, self.task = llm, texts, task
        self.passages, self.ptkb, self.max_words = passages, ptkb, max_words
        self.similarity = (ptkb_similarity, passage_similarity) if similarity_tokens else None

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        """Reject a config's options before anything loads: the task must exist and an LLM task needs an LLM."""
        from ikatkit.llm.prompts import TASKS

        task = options.get("task", "rtg_response")
        if task != "extractive" and task not in TASKS:
            raise IkatError(f"unknown task {task!r}", fix=f"use 'extractive' or one of {TASKS}")
        if task != "extractive" and options.get("llm") is None:
            raise IkatError(f"task {task!r} needs an LLM and the config declares none",
                            fix='declare one ([resources.llm] kind = "llm") or use task = "extractive"')
        check_mappings(options)

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        from ikatkit.llm.guards import CUT_NOTE, check_response, cut_before_loop, end_at_sentence

        for record in records:
            top = [pid for pid, _ in record.ranking[: self.passages]]
            record.used = top if record.uses("passages") else []
            record.ptkb_used = [k for k, _ in record.ptkb if k in record.ptkb_all][: self.ptkb] if record.uses(
                "ptkb") else []
            record.passage_texts = self.texts(top[:1] if not record.used else record.used)
        if self.task == "extractive":
            outputs = [top_text(r) for r in records]
        else:
            assert self.llm is not None  # check() refuses an LLM task without an LLM
            outputs = chat(self.llm, self.task, [evidence_variables(r, self.similarity) for r in records])
        for record, output in zip(records, outputs):
            problem = check_response(output) if self.task != "extractive" else None
            kept = cut_before_loop(output, list(record.passage_texts.values())) if problem else None
            if kept and self.llm is not None:  # a problem: an LLM's output (the extractive task's has none)
                reject(record, self.llm, self.name, output, f"{problem}: {CUT_NOTE}")
                output = kept
            elif problem and self.llm is not None:
                reject(record, self.llm, self.name, output, f"{problem}: top passage used")
                output = top_text(record)
            if self.task != "extractive" and not (problem and not kept):  # the model's text: end at a sentence
                output = end_at_sentence(output)
            record.response = " ".join(output.split()[: self.max_words])
        return records
