"""Evaluate dialogue context selection without an LLM (the paper's Table 2 for iKAT).

For each method, the retrieval query is the utterance plus the selected turns' utterances (or, with an LLM,
its rewrite from the selected context); BM25 ranks the index (optionally re-ranked), and the rankings are
compared against ``all`` with the project's paired tests on every judged turn (a query that retrieves nothing,
e.g. a rewrite of stopwords, scores 0), on all conversations and on those with at least
two oracle segments. Segmentation agreement: of the pairs (earlier turn, turn) both with provenance, those
a method puts in one context against those sharing a provenance document.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ikatkit.capabilities import ChatLLM, Ranker
from ikatkit.evaluate.qrels import Qrels, load_qrels
from ikatkit.stages.context import METHODS, RELEVANT, SCORED_METHODS, SelectContext, context_query, document_of, \
    oracle_segments
from ikatkit.pipelines.pipeline import Pipeline
from ikatkit.pipelines.record import TurnRecord, records_for
from ikatkit.topics import Topics, split_query_id

if TYPE_CHECKING:
    from ikatkit.evaluate.compare import Comparison

MEASURES = ("R(rel=2)@1", "R(rel=2)@5", "R(rel=2)@10", "nDCG@3")
SUBSETS = ("all conversations", ">= 2 oracle segments")


def provenance_qrels(topics: Topics) -> Qrels:
    """Each turn's ``response_provenance`` passages as relevant (grade 2): qrels for topics NIST did not judge,
    e.g. the 2023 training topics, where thresholds are tuned."""
    return {turn.qid: {pid: RELEVANT for pid in turn.response_provenance} for turn in topics
            if turn.response_provenance}


def segmentation_agreement(records: Sequence[TurnRecord]) -> dict[str, float]:
    """Pairwise "same segment" precision and recall of the selected contexts against the oracle's, over the
    pairs (earlier turn, turn) of a conversation where both turns have provenance."""
    predicted = gold = both = 0
    for record in records:
        if not record.provenance:
            continue
        docs = {document_of(pid) for pid in record.provenance}
        kept = set(record.context_ids if record.context_ids is not None else record.history_ids)
        for qid, cited in zip(record.history_ids, record.history_provenance):
            if not cited:
                continue
            same = any(document_of(pid) in docs for pid in cited)
            predicted += qid in kept
            gold += same
            both += same and qid in kept
    return {"precision": both / predicted if predicted else math.nan, "recall": both / gold if gold else math.nan,
            "predicted_pairs": predicted, "oracle_pairs": gold}


@dataclass
class ContextEvaluation:
    """Per subset a comparison against ``all``; per method segmentation agreement and selection time."""

    comparisons: dict[str, Comparison]
    agreement: dict[str, dict[str, float]]
    conversations: dict[str, list[str]]
    seconds: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    guarded: dict[str, dict[str, int]] = field(default_factory=dict)  # with an LLM: per method, rejected rewrites

    def to_markdown(self) -> str:
        lines = []
        for subset, comparison in self.comparisons.items():
            turns = next(iter(comparison.results.values())).evaluated
            lines += [f"{subset}: {len(self.conversations[subset])} conversations, {len(turns)} judged turns", "",
                      "| method | " + " | ".join(comparison.measures) + " |",
                      "|---" * (len(comparison.measures) + 1) + "|"]
            for method in comparison.results:
                cells = []
                for measure in comparison.measures:
                    row = next(r for r in comparison.rows if r["run"] == method and r["measure"] == measure)
                    star = "*" if row["p_adjusted"] < 0.05 else ""  # nan compares False
                    p = "" if method == comparison.baseline else f" (p={row['p']:.3g}){star}"
                    cells.append(f"{row['mean']:.4f}{p}")
                lines.append(f"| {method} | " + " | ".join(cells) + " |")
            lines.append("")
        first = next(iter(self.comparisons.values()))
        lines += [f"p: paired {first.test} against {first.baseline}; * p < 0.05 after {first.correction} correction "
                  "over every row and measure.", "",
                  "| method | same-segment precision | recall | pairs kept | oracle pairs | selection s |",
                  "|---|---|---|---|---|---|"]
        for method, a in self.agreement.items():
            lines.append(f"| {method} | {a['precision']:.3f} | {a['recall']:.3f} | {a['predicted_pairs']} | "
                         f"{a['oracle_pairs']} | {self.seconds[method]:.2f} |")
        if self.guarded:
            lines += ["", "Rewrites the guards rejected (the raw utterance searched instead):", ""]
            lines += [f"- {method}: {sum(reasons.values())}" + "".join(
                f"; {reason} {count}" for reason, count in sorted(reasons.items())) for method, reasons in
                self.guarded.items()]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON values (NaN, e.g. a p-value of identical rankings, as null)."""
        return _finite({"settings": self.settings, "conversations": self.conversations, "seconds": self.seconds,
                "agreement": self.agreement, "guarded": self.guarded,
                "results": {subset: {"rows": c.rows, "evaluated": {m: len(r.evaluated) for m, r in c.results.items()}}
                            for subset, c in self.comparisons.items()}})


def _finite(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def evaluate_context(topics: Topics, index: str | Path, qrels: Qrels | str | Path, *,
                     methods: Sequence[str] = METHODS, n: int = 6, thresholds: dict[str, Sequence[float]] | None = None,
                     checks: Sequence[str] = ("context",), passages: int = 10, scorer: Any = None,
                     k: int = 1000, reranker: Ranker | None = None, rerank_depth: int = 100, llm: ChatLLM | None = None,
                     test: str = "ttest", correction: str = "holm") -> ContextEvaluation:
    """Rank with each method's context (``all``, the baseline, always first) and compare.

    ``thresholds`` maps ``cascade`` (also used by ``cascade_limit``) and ``coherence`` to the thresholds to try
    (default ``[0.5]``; with several, a row per value, named ``method@value``); ``checks`` the cascade inputs to try
    (a row per value, named ``method/check``, when several); ``scorer`` is the ranker they
    score with; ``reranker`` re-ranks the top ``rerank_depth``; ``llm`` rewrites the utterance from the selected
    context (the RtG rewrite prompt) instead of concatenating.
    """
    from ikatkit.evaluate.compare import compare_runs
    from ikatkit.rank.rerank import rerank_lists
    from ikatkit.artifact import open_index
    from ikatkit.retrieve.search import search

    qrels = qrels if isinstance(qrels, dict) else load_qrels(qrels)
    thresholds = {"cascade": [0.5], "coherence": [0.5], **(thresholds or {})}
    searcher = open_index(index, "bm25").searcher()
    rankings: dict[str, dict[str, dict[str, float]]] = {}
    agreement: dict[str, dict[str, float]] = {}
    seconds: dict[str, float] = {}
    guarded: dict[str, dict[str, int]] = {}
    variants = []
    for method in ["all", *(m for m in methods if m != "all")]:
        tried = thresholds["coherence" if method == "coherence" else "cascade"] if method in SCORED_METHODS else [0.5]
        inputs = list(checks) if method.startswith("cascade") else ["context"]
        variants += [(method + (f"/{c}" if len(inputs) > 1 else "") + (f"@{t:g}" if len(tried) > 1 else ""),
                      method, t, c) for c in inputs for t in tried]
    for name, method, threshold, check in variants:
        records = records_for(topics)
        stage = SelectContext(method, n=n, threshold=threshold, passages=passages, check=check,
                              qrels=qrels if method == "oracle_qrels" else None,
                              ranker=scorer if method in SCORED_METHODS else None, searcher=searcher)
        select = Pipeline([stage])  # the contract enforced, as in a run
        select.check(records)
        records = select(records)
        seconds[name] = select.seconds[stage.name]
        agreement[name] = segmentation_agreement(records)
        if llm is not None:
            from ikatkit.stages.core import Rewrite

            queries = {r.qid: r.query or r.utterance for r in Pipeline([Rewrite(llm)])(records)}
            reasons = [note.split(":")[0] for r in records for note in r.notes if note.endswith(": raw utterance used")]
            guarded[name] = {reason: reasons.count(reason) for reason in sorted(set(reasons))}
        else:
            queries = {r.qid: context_query(r) for r in records}
        found = search(searcher, queries, k)  # the retrieve and rerank stages' functions
        rankings[name] = {qid: dict(hits) for qid, hits in found.items()}
        if reranker is not None:
            tops = {qid: [pid for pid, _ in hits[:rerank_depth]] for qid, hits in found.items()}
            rankings[name] = {qid: dict(rerank_lists(reranker, {qid: (queries[qid], ids)}, searcher.texts(ids))[qid])
                              for qid, ids in tops.items()}
    segmented = [c.id for c in topics.conversations
                 if oracle_segments([t.response_provenance for t in c.turns]) >= 2]
    conversations = {SUBSETS[0]: [c.id for c in topics.conversations], SUBSETS[1]: segmented}
    comparisons = {}
    for subset, ids in conversations.items():
        keep = set(ids)
        subset_qrels = {qid: docs for qid, docs in qrels.items() if split_query_id(qid)[0] in keep}
        if subset_qrels:
            comparisons[subset] = compare_runs(rankings, subset_qrels, baseline="all", measures=list(MEASURES),
                                               test=test, correction=correction, missing="zero")
    settings = {"methods": list(rankings), "n": n, "thresholds": thresholds, "checks": list(checks),
                "passages": passages, "k": k,
                "scorer": getattr(scorer, "model_name", None), "reranker": getattr(reranker, "model_name", None),
                "rerank_depth": rerank_depth if reranker is not None else None,
                "llm": getattr(llm, "model", None) if llm is not None else None, "test": test, "correction": correction}
    return ContextEvaluation(comparisons, agreement, conversations, seconds, settings, guarded)


def write_evaluation(result: ContextEvaluation, out: str | Path) -> list[Path]:
    """``context.md`` and ``context.json`` in ``out``, written atomically."""
    from ikatkit.atomic import write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "context.md", result.to_markdown())
    write_text(out / "context.json", json.dumps(result.to_json(), indent=2, allow_nan=False) + "\n")
    return [out / "context.md", out / "context.json"]
