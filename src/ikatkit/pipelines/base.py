"""The Stage base and the helpers every stage may use.

A stage is one ``transform`` over a batch of turn records. Its contract is declared as class attributes naming
:class:`~ikatkit.pipelines.record.TurnRecord` fields:

- ``requires``: fields an earlier stage must have set (``load_config`` rejects a config where none did);
- ``ordered``: fields read when an earlier stage set them, with a fallback otherwise (e.g. ``rank_ptkb`` ranks on
  the raw utterance without a query); a stage that sets one of them must come earlier, so ``load_config`` rejects
  one placed after (:meth:`Stage.ordered_reads` may depend on the options);
- ``optional``: fields read when set, with a fallback, wherever their producer stands (e.g. ``generate_answer``
  answers from every PTKB statement before ``classify_ptkb`` chose some: the GtR design);
- ``provides``: fields it sets; ``single_list_provides``: fields it sets only while each turn has one candidate list.

Every stage may append to ``notes`` and set its own entry of ``rejected`` (:data:`SHARED_FIELDS`). The
:class:`~ikatkit.pipelines.pipeline.Pipeline` checks after each transform that a stage changed no other field
(:func:`ikatkit.pipelines.pipeline.run_stage`). A stage with a ``summary_key`` writes ``summary(records, seconds)``
into the run's manifest under that key.

Hooks, each with a do-nothing default, that a stage overrides when it needs them:

- at config load (class methods, nothing built): ``check(options, run_type)`` rejects bad options;
  ``ordered_reads(options)`` narrows ``ordered`` by the options; ``check_placement(options, placement)`` checks
  what needs the pipeline around the stage (the fields set before it, the kinds of its resources);
- once the pipeline is built (:class:`~ikatkit.pipelines.pipeline.Pipeline`): ``resource_names`` is set to
  ``{parameter: resource name}`` (e.g. ``retrieve`` keys its candidates by its searcher's name); ``bind_out(out)``
  gives a stage that keeps files of its own the run's folder (``track_persona``'s store);
  ``check_records(records)`` rejects topics the stage cannot work on before any batch runs (``ikatkit run``
  calls it with every turn of the topics, ``ikatkit interactive`` with each turn);
- after a run: ``summary(records, seconds)`` (with ``summary_key``);
- in a training loop: ``train(records, references, respond)`` runs the stage against reference responses and returns
  the rows a model of the stage learns from (Agent-R's ``refine_memory``); training loops call it through
  :func:`ikatkit.pipelines.pipeline.train_stage`, which enforces the contract as for ``transform``.

Stage modules import this module (and :func:`ikatkit.pipelines.registry.register`); this module imports no stage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ikatkit.capabilities import ChatLLM
from ikatkit.errors import IkatError
from ikatkit.pipelines.record import TurnRecord

# Set when a record is made from its turn: every stage may read them.
INITIAL_FIELDS = ("qid", "utterance", "history", "ptkb_all", "resolved_utterance", "gold_ptkb", "history_ids",
                  "provenance", "history_provenance", "user_id")
# Written by any stage without declaring them: ``notes`` (what was used instead) and ``rejected`` (guarded outputs).
SHARED_FIELDS = ("notes", "rejected")


@dataclass(frozen=True)
class StagePosition:
    """Where a stage stands in its config: the fields set before it and the kind of each resource it uses
    (``{"searcher": "bm25", ...}``; ``None`` for a resource parameter left unset)."""

    before: frozenset[str]
    kinds: dict[str, str | None] = field(default_factory=dict)


class Stage:
    """Base of every pipeline stage (see the module's docstring for the contract)."""

    name: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()
    ordered: ClassVar[tuple[str, ...]] = ()
    optional: ClassVar[tuple[str, ...]] = ()
    provides: ClassVar[tuple[str, ...]] = ()
    single_list_provides: ClassVar[tuple[str, ...]] = ()
    summary_key: ClassVar[str | None] = None  # the run manifest's key of :meth:`summary`, if the stage has one
    resource_names: dict[str, str]  # {parameter: resource name}, set by build_stages on every stage it builds

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        """Reject bad options before anything loads (an IkatError whose ``where`` is the option's key)."""

    @classmethod
    def ordered_reads(cls, options: dict[str, Any]) -> tuple[str, ...]:
        """The order-dependent reads of a stage configured with ``options`` (``ordered`` unless overridden)."""
        return cls.ordered

    @classmethod
    def check_placement(cls, options: dict[str, Any], placement: StagePosition) -> None:
        """Reject a stage its place or its resources make wrong (called by ``load_config`` after the order)."""

    @classmethod
    def declared(cls) -> frozenset[str]:
        """Every field the stage may write: what it provides and the shared fields."""
        return frozenset((*cls.provides, *cls.single_list_provides, *SHARED_FIELDS))

    @classmethod
    def summary(cls, records: Sequence[TurnRecord], seconds: float | None) -> dict[str, Any] | None:
        """For the run manifest (under ``summary_key``): what the stage did over a run's records, None if nothing;
        ``seconds`` is the stage's time in the run."""
        return None

    def bind_out(self, out: Path) -> None:
        """Keep the stage's own files under the run's output folder ``out`` (default: the stage keeps none)."""

    def check_records(self, records: Sequence[TurnRecord]) -> None:
        """Reject, with an IkatError, topics the stage cannot work on before any batch runs (default: none)."""

    def train(self, records: list[TurnRecord], references: dict[str, str],
              respond: Callable[[list[TurnRecord]], list[TurnRecord]]) -> list[Any]:
        """In a training loop: work on ``records`` as ``transform`` does, judged against ``references`` (qid ->
        reference response) through ``respond`` (the stages after it), and return what a model of the stage learns
        from (default: nothing to learn, no record changed)."""
        return []

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        raise NotImplementedError


def prompt_context(record: TurnRecord) -> dict[str, Any]:
    """Prompt variables shared by every task: the canonical context (as ``select_context`` chose it), the PTKB,
    the question."""
    return {
        "history": record.context_history,
        "utterance": record.utterance,
        "query": record.query or record.utterance,
        "ptkb": record.ptkb_texts() or list(record.ptkb_all.values()),
        "all_ptkb": list(record.ptkb_all.items()),
    }


def candidate_key(retriever: str, query: str) -> str:
    """The key of one candidate list: the retriever's resource name and the query text."""
    return f"{retriever}\t{query}"


def query_of(key: str) -> str:
    """The query text of a candidate key."""
    return key.partition("\t")[2]


def reject(record: TurnRecord, llm: ChatLLM, stage: str, output: str, note: str) -> None:
    """Note a guarded LLM output on the record (kept in ``rejected``) and count it as the LLM's fallback."""
    record.notes.append(note)
    record.rejected[stage] = output
    llm.count_fallback(f"{record.qid}: {note}")


def chat(llm: ChatLLM, task: str, variables: list[dict[str, Any]]) -> list[str]:
    """One LLM reply per set of prompt variables of ``task`` (none for none)."""
    from ikatkit.llm.prompts import STOPS, render

    return llm.chat([render(task, **v) for v in variables], stop=STOPS.get(task, ())) if variables else []


def check_mappings(options: dict[str, Any]) -> None:
    """``ptkb_similarity`` and ``passage_similarity`` name mappings of :mod:`ikatkit.pipelines.similarity`."""
    from ikatkit.pipelines.similarity import MAPPINGS

    for key in ("ptkb_similarity", "passage_similarity"):
        if options.get(key, "cosine") not in MAPPINGS:
            raise IkatError(f"unknown similarity mapping {key} = {options[key]!r}", where=key,
                            fix=f"use one of {MAPPINGS} (cosine: bi-encoder, sigmoid: cross-encoder, minmax: BM25)")


def evidence_variables(record: TurnRecord, similarity: tuple[str, str] | None = None) -> dict[str, Any]:
    """Prompt variables of a response from the record's evidence: the statements ``ptkb_used`` and the passages
    ``used`` names. With ``similarity`` (the mappings of :mod:`ikatkit.pipelines.similarity` of the PTKB and the
    passage scores) each carries its similarity token from its score in its ranking: ``(similarity 0.8) text``."""
    keys = [key for key in record.ptkb_used if key in record.ptkb_all]
    ptkb = [record.ptkb_all[key] for key in keys]
    passages = [record.passage_texts.get(pid, "") for pid in record.used]
    if record.memory:  # refine_memory: the condensed passages replace them (no ranker score: no token)
        passages = [record.memory]
    elif similarity:
        from ikatkit.pipelines.similarity import token, unit_scores

        own, ranked = unit_scores(record.ptkb, similarity[0]), unit_scores(record.ranking, similarity[1])
        ptkb = [f"(similarity {token(own.get(k, 0.0))}) {t}" for k, t in zip(keys, ptkb)]
        passages = [f"(similarity {token(ranked.get(pid, 0.0))}) {t}" for pid, t in zip(record.used, passages)]
    return dict(prompt_context(record), ptkb=ptkb, passages=passages)


def top_text(record: TurnRecord) -> str:
    """The text of the top-ranked passage (the extractive response and the guards' fallback)."""
    return record.passage_texts.get(record.ranking[0][0], "") if record.ranking else ""
