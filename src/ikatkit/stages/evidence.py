"""UniMS-RAG's inference with self-refinement (Algorithm 1): refine a response's evidence, then regenerate.

``refine_evidence`` follows ``respond``. Each round scores every evidence item of the prompt (the statements
``ptkb_used`` and the passages ``used``) by similarity x consistency: similarity is the item's ranker score mapped
to [0, 1] (``ptkb_similarity`` / ``passage_similarity``: :mod:`ikatkit.pipelines.similarity`), consistency the
embedding cosine of the item with the current response (the response-evaluation module's
:class:`ikatkit.evaluate.responses.Embedder`), mapped to [0, 1] as (c + 1) / 2; or, with
``consistency = "llm"``, the response evaluation's LLM judge (:class:`ikatkit.evaluate.responses.
nuggets.LlmMatcher`, prompt ``nugget_support``: the item as the nugget; support 1, partial 0.5, not / unparsable 0,
counted as the LLM's fallbacks). The ``alpha`` lowest-scoring items are taken out and each is replaced by the next
novel item of its source (the next statement of the PTKB ranking, the next passage of the passage ranking; an item
once taken out never returns); then the response is regenerated from the new evidence with the respond stage's prompt,
up to ``rounds`` rounds. A round that finds no novel item stops the loop without regenerating; a regenerated response
the guards reject is not used (the previous response and evidence stay, noted on the record). The trace of every round
is ``record.evidence``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ikatkit.capabilities import ChatLLM
from ikatkit.index.texts import TextsFunction
from ikatkit.errors import IkatError
from ikatkit.pipelines.base import Stage, chat, check_mappings, evidence_variables
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.registry import register

CONSISTENCY = ("embedding", "llm")
Consistency = Callable[[Sequence[str], Sequence[str], Sequence[str]], list[float]]  # responses, items, queries


@register
class RefineEvidence(Stage):
    """Algorithm 1 of UniMS-RAG over a batch (see the module's docstring)."""

    name = "refine_evidence"
    requires = ("used", "ptkb_used", "passage_texts", "response", "ranking")
    ordered = ("query", "context_ids", "ptkb", "memory")
    summary_key = "evidence_refinement"
    provides = ("used", "ptkb_used", "passage_texts", "response", "evidence")

    def __init__(self, llm: ChatLLM, texts: TextsFunction, task: str = "rtg_response", alpha: int = 1, rounds: int = 1,
                 consistency: str = "embedding", embedding_model: str = "bundled:minilm",
                 ptkb_similarity: str = "cosine", passage_similarity: str = "cosine", similarity_tokens: bool = False,
                 max_words: int = 250) -> None:
        self.check({"task": task, "alpha": alpha, "rounds": rounds, "consistency": consistency,
                    "ptkb_similarity": ptkb_similarity, "passage_similarity": passage_similarity})
        self.llm, self.texts, self.task, self.alpha, self.rounds = llm, texts, task, alpha, rounds
        self.similarity, self.tokens = (ptkb_similarity, passage_similarity), similarity_tokens
        self.max_words = max_words
        self.embedding_model = embedding_model
        self._embedder: Any = None
        self.consistency: Consistency = self.llm_consistency if consistency == "llm" else self.embedding_consistency

    @classmethod
    def summary(cls, records: Sequence[TurnRecord], seconds: float | None) -> dict[str, Any] | None:
        return evidence_summary(records, seconds)

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        from ikatkit.llm.prompts import TASKS

        if options.get("task", "rtg_response") not in TASKS:
            raise IkatError(f"unknown task {options['task']!r}", where="task",
                            fix="use the respond stage's task (rtg_response, gtr_response)")
        for key, low in (("alpha", 1), ("rounds", 0)):
            value = options.get(key, 1)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise IkatError(f"{key} = {value!r} must be an integer >= {low}", where=key,
                                fix=f"set {key} to {low} or more (the paper updates 1 item per round)")
        if options.get("consistency", "embedding") not in CONSISTENCY:
            raise IkatError(f"unknown consistency scorer {options['consistency']!r}", where="consistency",
                            fix=f"use one of {CONSISTENCY}")
        check_mappings(options)

    def embedding_consistency(self, responses: Sequence[str], evidence: Sequence[str],
                              queries: Sequence[str]) -> list[float]:
        """(cosine + 1) / 2 of each response with its evidence item (the response evaluation's embedder)."""
        if self._embedder is None:
            from ikatkit.evaluate.responses import shared_embedder

            self._embedder = shared_embedder(self.embedding_model)
        return [(c + 1) / 2 for c in self._embedder.similarity(list(responses), list(evidence))]

    def llm_consistency(self, responses: Sequence[str], evidence: Sequence[str], queries: Sequence[str]) -> list[float]:
        """The response evaluation's LLM judge: does the response support the item (1 / 0.5 / 0)."""
        from ikatkit.evaluate.responses.data import Nugget
        from ikatkit.evaluate.responses.nuggets import LlmMatcher

        nuggets = [[Nugget("evidence", text, 1)] for text in evidence]
        return [values[0] for values in LlmMatcher(self.llm).support(list(responses), nuggets, list(queries))]

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.evidence = {"initial_response": record.response, "rounds": [], "llm_calls": 0, "stopped": "",
                               "removed": []}
        live = [r for r in records if r.used or r.ptkb_used]
        for record in records:
            if not (record.used or record.ptkb_used):
                record.evidence["stopped"] = "no evidence"
        for round_ in range(1, self.rounds + 1):
            live = self._round(live, round_)
            if not live:
                break
        for record in live:
            record.evidence["stopped"] = f"{self.rounds} rounds done"
        for record in records:
            record.evidence["final"] = {"ptkb": list(record.ptkb_used), "passages": list(record.used)}
        return records

    # -- one round over the batch ------------------------------------------------------------------------------
    def _items(self, record: TurnRecord) -> list[tuple[str, str, str, float]]:
        """The prompt's evidence as ``(source, id, text, similarity in [0, 1])``."""
        from ikatkit.pipelines.similarity import unit_scores

        own, ranked = unit_scores(record.ptkb, self.similarity[0]), unit_scores(record.ranking, self.similarity[1])
        return ([("ptkb", k, record.ptkb_all.get(k, ""), own.get(k, 0.0)) for k in record.ptkb_used]
                + [("passages", p, record.passage_texts.get(p, ""), ranked.get(p, 0.0)) for p in record.used])

    def _round(self, records: list[TurnRecord], round_: int) -> list[TurnRecord]:
        """Score, swap and regenerate; returns the records that go on to the next round."""
        from ikatkit.llm.guards import check_response

        items = [self._items(r) for r in records]
        rows = [(r.response, text, r.query or r.utterance) for r, its in zip(records, items) for _, _, text, _ in its]
        consistency = iter(self.consistency(*map(list, zip(*rows))) if rows else [])
        changed, previous = [], []
        for record, its in zip(records, items):
            scored: list[dict[str, Any]] = [
                {"source": s, "id": i, "similarity": round(sim, 6), "consistency": round(next(consistency), 6)}
                for s, i, _, sim in its]
            for item in scored:
                item["score"] = round(item["similarity"] * item["consistency"], 6)
            order = sorted(range(len(scored)), key=lambda j: (scored[j]["score"], j))
            removed = [scored[j] for j in order[: self.alpha]]
            added = self._swap(record, removed)
            step = {"round": round_, "items": scored, "removed": [[x["source"], x["id"]] for x in removed],
                    "added": added}
            record.evidence["rounds"].append(step)
            if not added:
                record.evidence["stopped"] = f"no novel evidence in round {round_}"
                continue
            previous.append((list(record.ptkb_used), list(record.used), dict(record.passage_texts)))
            self._apply(record, removed, added)
            changed.append(record)
        outputs = chat(self.llm, self.task, [evidence_variables(r, self.similarity if self.tokens else None)
                                              for r in changed])
        going = []
        for record, output, (ptkb_used, used, texts) in zip(changed, outputs, previous):
            record.evidence["llm_calls"] += 1
            step = record.evidence["rounds"][-1]
            problem = check_response(output)
            if problem:
                record.notes.append(f"{problem}: evidence refinement kept the previous response")
                record.ptkb_used, record.used, record.passage_texts = ptkb_used, used, texts
                step["response"], step["rejected"] = None, output
                record.evidence["stopped"] = f"regenerated response rejected in round {round_}"
                continue
            record.response = step["response"] = " ".join(output.split()[: self.max_words])
            record.evidence["removed"].extend(step["removed"])
            going.append(record)
        return going

    def _swap(self, record: TurnRecord, removed: list[dict[str, Any]]) -> list[list[str]]:
        """The next novel item of each removed item's source, ``[source, id]`` (none when a source runs out)."""
        seen = {("ptkb", k) for k in record.ptkb_used} | {("passages", p) for p in record.used}
        seen |= {(s, i) for s, i in record.evidence["removed"]}
        ranked = {"ptkb": [k for k, _ in record.ptkb if k in record.ptkb_all],
                  "passages": [p for p, _ in record.ranking]}
        added: list[list[str]] = []
        for item in removed:
            seen.add((item["source"], item["id"]))
            novel = next((i for i in ranked[item["source"]] if (item["source"], i) not in seen), None)
            if novel is not None:
                seen.add((item["source"], novel))
                added.append([item["source"], novel])
        return added

    def _apply(self, record: TurnRecord, removed: list[dict[str, Any]], added: list[list[str]]) -> None:
        """The new evidence: removed items out, added items at the end of their source's list, their texts fetched."""
        gone = {(x["source"], x["id"]) for x in removed}
        record.ptkb_used = [k for k in record.ptkb_used if ("ptkb", k) not in gone] + [
            i for s, i in added if s == "ptkb"]
        record.used = [p for p in record.used if ("passages", p) not in gone] + [i for s, i in added if s == "passages"]
        new = [p for p in record.used if p not in record.passage_texts]
        if new:
            record.passage_texts = {**record.passage_texts, **self.texts(new)}


def evidence_summary(records: Sequence[TurnRecord], seconds: float | None) -> dict[str, Any] | None:
    """For the manifest: turns refined, LLM calls per turn, items swapped, why the loops stopped (None without)."""
    traces = [r.evidence for r in records if r.evidence]
    if not traces:
        return None
    calls = sum(t["llm_calls"] for t in traces)
    return {"turns": len(traces), "turns_regenerated": sum(t["llm_calls"] > 0 for t in traces),
            "llm_calls": calls, "llm_calls_per_turn": round(calls / len(traces), 4),
            "items_removed": sum(len(t["removed"]) for t in traces),
            "stopped": {reason: sum(t["stopped"] == reason for t in traces)
                        for reason in sorted({t["stopped"] for t in traces})},
            "seconds": round(seconds, 3) if seconds is not None else None}
