"""ProMiSe self-refinement of responses: the ``refine_response`` stage (Algorithm 1 of "Self-Refinement of Language
Models from External Proxy Metrics Feedback", Ramji et al. 2024).

Per turn: ``n`` sampled responses to a prompt that states the principles; y0 is the candidate that is best on the
most proxy metrics. If y0 clears every metric's threshold it is the response. Otherwise up to ``iterations`` (J)
rounds: one refinement prompt per principle (``prompts/refine_{principle}.txt``: three demonstrations written from
the 2023 train topics, a worse response tagged "not {principle}", "Let's make this response more {principle}.", a
better one tagged "more {principle}") applied to the current best; the candidate best on most metrics is accepted at
once if it clears every threshold, and otherwise replaces the current best only when the weighted sum of the
metrics on which it is at least as good exceeds λ (``improvement_threshold``; weights are normalized to sum 1).
Ties go to the earlier candidate. The algorithm's loop reads ``j = 0 .. J``; here J counts the rounds.

Proxy metrics read the candidate, the used passages and the conversation's user utterances (all previous ones and
the current one) — never a reference response. ``record.refinement`` keeps every candidate with its scores, its
iteration and principle, each round's decision and why the loop stopped. An empty refinement output is counted
and dropped (the previous best stays).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ikatkit.capabilities import ChatLLM
from ikatkit.errors import IkatError
from ikatkit.llm.base import check_sampling
from ikatkit.pipelines.base import Stage
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.registry import register

PRINCIPLES = ("specificity", "faithfulness", "relevance")


def _rouge_metric(kind: str, part: str, against: str) -> Callable[..., list[float]]:
    def score(responses: list[str], passages: list[list[str]], history: list[str], _: Any) -> list[float]:
        from ikatkit.evaluate.responses import rouge

        references = [" ".join(p) for p in passages] if against == "passages" else history
        return rouge(responses, references, types=(kind,))[f"{kind}_{part}"]

    return score


def _embedding_metric(responses: list[str], passages: list[list[str]], _: list[str], embedder: Any) -> list[float]:
    """Highest embedding cosine of the response with one of its passages (-1 without passages)."""
    return [float(best[0]) for best in embedder.best_match([[r] for r in responses], passages)]


# name -> (what it measures, lowest and highest value, scorer)
METRICS: dict[str, tuple[str, tuple[float, float], Callable[..., list[float]]]] = {
    "rouge1_recall_passages": ("ROUGE-1 recall vs the used passages (specificity)", (0.0, 1.0),
                               _rouge_metric("rouge1", "r", "passages")),
    "rougeL_passages": ("ROUGE-L F1 vs the used passages (faithfulness)", (0.0, 1.0),
                        _rouge_metric("rougeL", "f", "passages")),
    "rougeL_history": ("ROUGE-L F1 vs the user's utterances (relevance)", (0.0, 1.0),
                       _rouge_metric("rougeL", "f", "history")),
    "embedding_passages": ("embedding cosine vs the best used passage (consistency)", (-1.0, 1.0), _embedding_metric),
}
DEFAULT_METRICS = {"rouge1_recall_passages": {"threshold": 0.02, "weight": 1.0},
                   "rougeL_passages": {"threshold": 0.05, "weight": 1.0},
                   "rougeL_history": {"threshold": 0.05, "weight": 1.0}}
_ECHO = re.compile(r"^\s*(agent\s+)?response(\s*2)?\s*(\([^)]*\))?\s*:\s*", re.I)
_NEXT = re.compile(r"\n\s*(###|agent response|let's make this response|user:)", re.I)


def clean_output(text: str, max_words: int) -> str:
    """A refinement's response: echoed "Agent response 2 (...):" dropped, cut before a next example, word-capped."""
    text = _ECHO.sub("", text.strip(), count=1)
    return " ".join(_NEXT.split("\n" + text, maxsplit=1)[0].split()[:max_words])


def majority(scores: Sequence[dict[str, float]], metrics: Sequence[str]) -> int:
    """Index of the candidate that is best (first among equals) on the most metrics (first among equals)."""
    wins = [0] * len(scores)
    for metric in metrics:
        wins[max(range(len(scores)), key=lambda i: (scores[i][metric], -i))] += 1
    return max(range(len(scores)), key=lambda i: (wins[i], -i))


@register
class RefineResponse(Stage):
    """ProMiSe: best-of-``n`` sampling, threshold sufficiency, per-principle refinement for ``iterations`` rounds.

    ``metrics``: ``{name: {threshold, weight}}`` over :data:`METRICS`; ``improvement_threshold``: λ; sampling:
    ``temperature``, ``top_k``, ``top_p``, ``seed`` (round j samples with seed·1000 + j, so a round whose prompt
    repeats an earlier one still draws a new candidate). ``embedding_model`` serves ``embedding_passages``.
    """

    name = "refine_response"
    requires = ("used", "passage_texts", "response")
    ordered = ("query", "context_ids", "ptkb")
    summary_key = "refinement"
    provides = ("response", "refinement")

    def __init__(self, llm: ChatLLM, n: int = 4, iterations: int = 2, temperature: float = 0.7, top_k: int = 50,
                 top_p: float = 1.0, seed: int = 0, improvement_threshold: float = 0.5,
                 metrics: dict[str, dict[str, float]] | None = None, principles: list[str] | None = None,
                 embedding_model: str = "bundled:minilm", ptkb: int = 3, max_words: int = 250) -> None:
        options: dict[str, Any] = dict(n=n, iterations=iterations, temperature=temperature, top_k=top_k, top_p=top_p,
                       improvement_threshold=improvement_threshold,
                       metrics=DEFAULT_METRICS if metrics is None else metrics,
                       principles=list(PRINCIPLES) if principles is None else principles)
        self.check(options)
        self.llm, self.n, self.iterations, self.seed = llm, n, iterations, seed
        self.sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
        self.metrics = {m: float(spec["threshold"]) for m, spec in options["metrics"].items()}
        total = sum(float(spec.get("weight", 1.0)) for spec in options["metrics"].values())
        self.weights = {m: float(spec.get("weight", 1.0)) / total for m, spec in options["metrics"].items()}
        self.improvement_threshold, self.principles = improvement_threshold, list(options["principles"])
        self.embedding_model, self.ptkb, self.max_words = embedding_model, ptkb, max_words
        self._embedder: Any = None

    @classmethod
    def summary(cls, records: Sequence[TurnRecord], seconds: float | None) -> dict[str, Any] | None:
        return refinement_summary(records, seconds)

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        """Every option's value in its range: one IkatError whose ``where`` is the option's dotted key."""
        def fail(where: str, message: str, fix: str) -> None:
            raise IkatError(message, where=where, fix=fix)

        if options.get("n", 4) < 1:
            fail("n", f"n = {options['n']}: best-of-N needs at least one candidate", "set n = 1 or more")
        if options.get("iterations", 2) < 0:
            fail("iterations", f"iterations = {options['iterations']} is negative", "set iterations = 0 or more")
        check_sampling(options, "n", 4)
        if not 0 <= options.get("improvement_threshold", 0.5) < 1:
            fail("improvement_threshold", f"improvement_threshold = {options['improvement_threshold']} is outside "
                 "[0, 1)", "set λ in [0, 1): the weights are normalized to sum 1 (the paper: 0.5)")
        principles = options.get("principles")
        principles = list(PRINCIPLES) if principles is None else principles
        if not principles:
            fail("principles", "principles is empty: no refinement prompt to apply",
                 f"name some of {list(PRINCIPLES)}, or set iterations = 0 for best-of-N only")
        for p in principles:
            if p not in PRINCIPLES:
                fail("principles", f"unknown principle {p!r}", f"use some of {list(PRINCIPLES)}")
        if len(set(principles)) != len(principles):
            fail("principles", "a principle is named twice", "name each principle once")
        metrics = options.get("metrics")
        metrics = DEFAULT_METRICS if metrics is None else metrics
        if not isinstance(metrics, dict) or not metrics:
            fail("metrics", "metrics is not a table of at least one metric",
                 'write metrics = { rougeL_passages = { threshold = 0.05, weight = 1.0 } }')
        for name, spec in metrics.items():
            if name not in METRICS:
                fail(f"metrics.{name}", f"unknown proxy metric {name!r}", f"use some of {sorted(METRICS)}")
            if not isinstance(spec, dict) or "threshold" not in spec or set(spec) - {"threshold", "weight"}:
                fail(f"metrics.{name}", f"metric {name!r} needs a table of threshold (and weight)",
                     f"write {name} = {{ threshold = ..., weight = 1.0 }}")
            for key in spec:
                if not isinstance(spec[key], (int, float)) or isinstance(spec[key], bool):
                    fail(f"metrics.{name}.{key}", f"{key} {spec[key]!r} of {name} is not a number",
                         f"write {key} = a number, e.g. {key} = {1.0 if key == 'weight' else 0.05}")
            low, high = METRICS[name][1]
            if not low <= spec["threshold"] <= high:
                fail(f"metrics.{name}.threshold", f"threshold {spec['threshold']} of {name} is outside [{low}, {high}]",
                     f"set a threshold in [{low}, {high}]")
            if spec.get("weight", 1.0) < 0:
                fail(f"metrics.{name}.weight", f"weight {spec['weight']} of {name} is negative", "use weights >= 0")
        if sum(spec.get("weight", 1.0) for spec in metrics.values()) <= 0:
            fail("metrics", "the metric weights sum to 0", "give at least one metric a positive weight")

    # -- scoring ------------------------------------------------------------------------------------------
    def score(self, texts: list[str], passages: list[list[str]], history: list[str]) -> list[dict[str, float]]:
        """Every proxy metric of each text (rows parallel: its passages, its conversation's utterances)."""
        if not texts:
            return []
        if "embedding_passages" in self.metrics and self._embedder is None:
            from ikatkit.evaluate.responses import shared_embedder

            self._embedder = shared_embedder(self.embedding_model)
        columns = {m: METRICS[m][2](texts, passages, history, self._embedder) for m in self.metrics}
        return [{m: round(float(columns[m][i]), 6) for m in self.metrics} for i in range(len(texts))]

    def sufficient(self, scores: dict[str, float]) -> bool:
        return all(scores[m] >= tau for m, tau in self.metrics.items())

    def improvement(self, new: dict[str, float], old: dict[str, float]) -> float:
        """Σ_t w_t · 1(m_t(new) >= m_t(old)), weights summing to 1."""
        return round(sum(w for m, w in self.weights.items() if new[m] >= old[m]), 6)

    # -- the algorithm over a batch -------------------------------------------------------------------------
    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        from ikatkit.llm.prompts import render

        context = [self._variables(r) for r in records]
        passages = [[r.passage_texts.get(pid, "") for pid in r.used] for r in records]
        history = [" ".join([u for u, _ in r.history] + [r.utterance]) for r in records]
        traces: list[dict[str, Any]] = [
            {"plain": r.response, "candidates": [], "rounds": [], "llm_calls": 0, "empty_outputs": 0,
             "initial": None, "best": None, "iterations": 0, "stopped": ""} for r in records]
        initial = self.llm.sample([render("promise_response", **v) for v in context], self.n,
                                  seed=self.seed * 1000, **self.sampling)
        self._add(traces, passages, history, [(i, 0, None, s, text) for i, outputs in enumerate(initial)
                                              for s, text in enumerate(outputs)])
        live = []
        for i, trace in enumerate(traces):
            pool = [c for c, cand in enumerate(trace["candidates"]) if cand["iteration"] == 0]
            if not pool:
                trace["stopped"] = "no usable candidate: the respond stage's response kept"
                continue
            trace["best"] = trace["initial"] = pool[majority([trace["candidates"][c]["scores"] for c in pool],
                                                             list(self.metrics))]
            if self.sufficient(trace["candidates"][trace["best"]]["scores"]):
                trace["stopped"] = "initial response sufficient"
            else:
                live.append(i)
        for j in range(1, self.iterations + 1):
            if not live:
                break
            prompts = [render(f"refine_{p}", **dict(context[i], response=self._text(traces[i])))
                       for i in live for p in self.principles]
            outputs = self.llm.sample(prompts, 1, seed=self.seed * 1000 + j, **self.sampling)
            rows = [(i, j, p, 0, outputs[k * len(self.principles) + q][0])
                    for k, i in enumerate(live) for q, p in enumerate(self.principles)]
            self._add(traces, passages, history, rows)
            live = [i for i in live if self._round(traces[i], j)]
        for i in live:
            traces[i]["stopped"] = f"{self.iterations} iterations done"
        for record, trace in zip(records, traces):
            if trace["best"] is not None:
                record.response = self._text(trace)
            if trace["empty_outputs"]:
                record.notes.append("empty LLM output in refinement: dropped")
            record.refinement = trace
        return records

    def _variables(self, record: TurnRecord) -> dict[str, Any]:
        return {"history": record.context_history, "utterance": record.utterance,
                "query": record.query or record.utterance,
                "ptkb": record.ptkb_texts()[: self.ptkb],
                "passages": [record.passage_texts.get(pid, "") for pid in record.used]}

    @staticmethod
    def _text(trace: dict[str, Any]) -> str:
        return str(trace["candidates"][trace["best"]]["text"])

    def _add(self, traces: list[dict[str, Any]], passages: list[list[str]], history: list[str],
             rows: list[tuple[int, int, str | None, int, str]]) -> None:
        """Clean, count and score new candidates (one scoring call for the batch), then append them to traces."""
        kept = []
        for i, iteration, principle, sample, output in rows:
            traces[i]["llm_calls"] += 1
            text = clean_output(output, self.max_words)
            if text:
                kept.append((i, iteration, principle, sample, text))
            else:
                traces[i]["empty_outputs"] += 1
        scores = self.score([t for *_, t in kept], [passages[i] for i, *_ in kept], [history[i] for i, *_ in kept])
        for (i, iteration, principle, sample, text), values in zip(kept, scores):
            traces[i]["candidates"].append({"text": text, "scores": values, "iteration": iteration,
                                            "principle": principle, "sample": sample})

    def _round(self, trace: dict[str, Any], j: int) -> bool:
        """Decide round ``j`` of one turn (lines 8-12 of Algorithm 1); True when the loop goes on."""
        trace["iterations"] = j
        pool = [c for c, cand in enumerate(trace["candidates"]) if cand["iteration"] == j]
        if not pool:
            trace["rounds"].append({"iteration": j, "candidate": None, "decision": "no usable output: best kept"})
            return True
        new = pool[majority([trace["candidates"][c]["scores"] for c in pool], list(self.metrics))]
        scores, old = trace["candidates"][new]["scores"], trace["candidates"][trace["best"]]["scores"]
        if self.sufficient(scores):
            trace["best"], trace["stopped"] = new, f"sufficient at iteration {j}"
            trace["rounds"].append({"iteration": j, "candidate": new, "decision": "sufficient: accepted"})
            return False
        gain = self.improvement(scores, old)
        accepted = gain > self.improvement_threshold
        trace["rounds"].append({"iteration": j, "candidate": new, "improvement": gain,
                                "decision": "improved: new best" if accepted else "not improved: best kept"})
        if accepted:
            trace["best"] = new
        return True


def refinement_summary(records: Sequence[TurnRecord], seconds: float | None) -> dict[str, Any] | None:
    """For the manifest: turns refined, mean iterations, LLM calls per turn, empty outputs, seconds (None without
    a refine stage)."""
    traces = [r.refinement for r in records if r.refinement]
    if not traces:
        return None
    refined = [t for t in traces if t["iterations"] > 0]
    return {"turns": len(traces), "turns_refined": len(refined),
            "share_refined": round(len(refined) / len(traces), 4),
            "mean_iterations": round(sum(t["iterations"] for t in traces) / len(traces), 4),
            "llm_calls": sum(t["llm_calls"] for t in traces),
            "llm_calls_per_turn": round(sum(t["llm_calls"] for t in traces) / len(traces), 4),
            "empty_outputs": sum(t["empty_outputs"] for t in traces),
            "final_differs_from_initial": sum(t["best"] != t["initial"] for t in traces),
            "stopped": {reason: sum(t["stopped"] == reason for t in traces)
                        for reason in sorted({t["stopped"] for t in traces})},
            "seconds": round(seconds, 3) if seconds is not None else None}
