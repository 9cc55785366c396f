"""Agent-R of M-RAG (section 3.3): the ``refine_memory`` stage, its selector and its training (the boosting loop).

Memory: the top ``passages`` passages of the turn's ranking (after ``select_partition``, from the partition Agent-S
chose). The LLM proposes ``k`` candidate memories, query-focused condensations of those passages
(``prompts/refine_memory.txt``, ``k`` samples per prompt through ``LLM.sample``). A candidate the guards refuse
(empty, the prompt echoed, role tags, a repeated sentence: ``ikatkit.llm.guards.check_response``) is traced with
its reason and counted, never used; with no usable candidate the passages themselves stay the memory.

Training (:func:`ikatkit.training.refiner.train_refiner`, Algorithm 1 lines 11-20, with the reference): the
config's ``respond`` stage answers from the raw passages (h) and from each candidate memory (h'); Δ is a reference
measure of ``ikatkit.evaluate.responses`` (``metric``, ROUGE-L F1 by default) against the turn's canonical response.
Each round proposes a new pool; its best candidate by Δ replaces the kept memory when Δ(h', y) > Δ(h, y) (reward
Δ(h', y) - Δ(h, y), else 0). Every usable candidate's features and its gain over the raw passages,
Δ(h', y) - Δ(h_raw, y), are the selector's training rows.

Inference (:class:`RefineMemory`, no reference): the selector, a ridge regression of that gain on the candidate's
features (:data:`FEATURES`: token and embedding proxy scores against the passages and the query), predicts each
candidate's gain; the best is the memory when its prediction exceeds ``min_gain`` (the raw passages count as gain
0), else the passages stay. The paper's state compares candidates with a hypothesis h (Eq. 3), which would cost an
LLM response per turn before the choice; these features need none. The selector's file carries a fingerprint of
what shapes candidates and features (prompt, LLM, k, sampling, passages, features, metric, rounds) and a stage
configured otherwise refuses it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.atomic import write_json
from ikatkit.capabilities import ChatLLM
from ikatkit.index.texts import TextsFunction
from ikatkit.digest import json_digest
from ikatkit.errors import IkatError
from ikatkit.llm.base import check_sampling
from ikatkit.pipelines.base import Stage
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.registry import register

SELECTOR_VERSION = 1
FEATURES = ("k_precision", "passage_coverage", "query_coverage", "passage_cosine", "query_cosine", "words_100")
METRICS = ("ROUGE-1", "ROUGE-2", "ROUGE-L", "ROUGE-1-R", "ROUGE-2-R", "ROUGE-L-R", "Recall")
FALLBACK = "refine_memory: no usable candidate memory: raw passages used"
_LABEL = re.compile(r"^\s*(#+\s*)?note\s*:\s*", re.I)


def features(embedder: Any, candidates: Sequence[str], passages: Sequence[Sequence[str]],
             queries: Sequence[str]) -> np.ndarray:
    """``(N, F)``: per candidate, the share of its tokens in its passages (K-Precision), the share of the passages'
    and of the query's tokens it keeps, its best MiniLM cosine with a passage and with the query, words / 100."""
    from ikatkit.evaluate.responses import k_precision, token_recall

    if not candidates:
        return np.zeros((0, len(FEATURES)), dtype=np.float64)
    columns = [k_precision(candidates, passages),
               token_recall(candidates, [" ".join(p) for p in passages]),
               token_recall(candidates, queries),
               [float(best[0]) for best in embedder.best_match([[c] for c in candidates], [list(p) for p in passages])],
               embedder.similarity(candidates, queries),
               [len(c.split()) / 100 for c in candidates]]
    return np.asarray(columns, dtype=np.float64).T


def delta(metric: str, responses: Sequence[str], references: Sequence[str]) -> list[float]:
    """Δ: the declared response measure ``metric`` of each response against its reference."""
    from ikatkit.evaluate.responses import rouge, token_recall
    from ikatkit.evaluate.responses.measures import MEASURES

    measure = MEASURES[metric]
    if measure.scorer == "tokens":
        return token_recall(responses, references)
    return rouge(responses, references, types=(measure.key.rsplit("_", 1)[0],))[measure.key]


@dataclass
class MemorySelector:
    """Ridge regression (scikit-learn's) of a candidate's gain on its standardized features; tied to one
    fingerprint. Kept as plain numbers (weights, bias, the features' mean and scale), so a file reads back alone."""

    weights: list[float]
    bias: float
    mean: list[float]
    scale: list[float]
    fingerprint: str
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fit(cls, x: np.ndarray, gains: np.ndarray, fingerprint: str, ridge: float = 1.0,
            meta: dict[str, Any] | None = None) -> MemorySelector:
        if len(x) < 2:
            raise IkatError(f"{len(x)} usable candidate(s) to learn from", where="train-refiner",
                            fix="train on more turns (turns with a canonical response and retrieved passages)")
        from sklearn.linear_model import Ridge
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler().fit(x)  # population std; a constant feature keeps scale 1
        model = Ridge(alpha=ridge).fit(scaler.transform(x), gains)
        return cls([round(float(w), 8) for w in model.coef_], round(float(model.intercept_), 8),
                   [float(m) for m in scaler.mean_], [float(s) for s in scaler.scale_], fingerprint, meta or {})

    def predict(self, x: np.ndarray) -> np.ndarray:
        return ((x - np.asarray(self.mean)) / np.asarray(self.scale)) @ np.asarray(self.weights) + self.bias

    def save(self, path: str | Path) -> None:
        write_json(path, {"version": SELECTOR_VERSION, "features": list(FEATURES), **self.__dict__})

    @classmethod
    def load(cls, path: str | Path, fingerprint: str) -> MemorySelector:
        """The selector in ``path``; one clear error unless it was trained for candidates made as ``fingerprint``."""
        path = Path(path)
        fix = "train one with `ikatkit partition train-refiner CONFIG --topics TRAIN_TOPICS --out FILE`"
        if not path.is_file():
            raise IkatError("no memory selector here", path=path, fix=fix)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            version, features_ = data.pop("version"), data.pop("features")
            selector = cls(**data)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise IkatError(f"not a memory selector ({type(err).__name__})", path=path, fix=fix) from None
        if version != SELECTOR_VERSION or features_ != list(FEATURES):
            raise IkatError(f"selector version {version} over {features_}, this ikatkit reads {SELECTOR_VERSION} "
                            f"over {list(FEATURES)}", path=path, fix=fix)
        if selector.fingerprint != fingerprint:
            raise IkatError("this selector was trained for other candidate memories (prompt, LLM, k, sampling, "
                            "passages or metric differ from this stage's)", path=path,
                            fix="train it again with this config: " + fix.split("with ", 1)[1])
        return selector


@register
class RefineMemory(Stage):
    """Agent-R: ``k`` candidate memories from the top ``passages`` passages, one chosen by the trained ``selector``
    (see the module's docstring). Sampling: ``temperature``, ``top_k``, ``top_p``, ``seed``, ``max_new_tokens``;
    candidates are cut to ``max_words``. ``record.memory`` is the chosen memory ("" = the passages) and
    ``record.memory_trace`` every candidate with its features, guard verdict and predicted gain."""

    name = "refine_memory"
    requires = ("ranking",)
    ordered = ("query",)
    provides = ("memory", "memory_trace")

    def __init__(self, llm: ChatLLM, texts: TextsFunction, selector: str = "", k: int = 3, passages: int = 3,
                 temperature: float = 0.7, top_k: int = 50, top_p: float = 1.0, seed: int = 0,
                 max_new_tokens: int = 96, max_words: int = 100, min_gain: float = 0.0, metric: str = "ROUGE-L",
                 rounds: int = 1, embedding_model: str = "bundled:minilm") -> None:
        options = dict(k=k, passages=passages, temperature=temperature, top_k=top_k, top_p=top_p,
                       max_new_tokens=max_new_tokens, max_words=max_words, min_gain=min_gain, metric=metric,
                       rounds=rounds)
        self.check({**options, "selector": selector or "(training)"})
        self.llm, self.texts, self.k, self.passages, self.seed = llm, texts, k, passages, seed
        self.sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "max_new_tokens": max_new_tokens}
        self.max_words, self.min_gain, self.metric, self.rounds = max_words, min_gain, metric, rounds
        self.embedding_model = embedding_model
        self._embedder: Any = None
        self.selector = MemorySelector.load(selector, self.fingerprint()) if selector else None

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        """Every option's value in its range: one IkatError whose ``where`` is the option's key."""
        def fail(where: str, message: str, fix: str) -> None:
            raise IkatError(message, where=where, fix=fix)

        if not options.get("selector"):
            fail("selector", "refine_memory needs selector = \"FILE\" (the trained Agent-R)",
                 "train one with `ikatkit partition train-refiner CONFIG --topics TRAIN_TOPICS --out FILE`")
        for key, low in (("k", 1), ("passages", 1), ("max_new_tokens", 1), ("max_words", 1), ("rounds", 1)):
            if key in options and options[key] < low:
                fail(key, f"{key} = {options[key]} is below {low}", f"set {key} = {low} or more")
        check_sampling(options, "k", 3)
        if not -1 <= options.get("min_gain", 0.0) <= 1:
            fail("min_gain", f"min_gain = {options['min_gain']} is outside [-1, 1]",
                 "set min_gain in [-1, 1] (0: use a candidate only when it is predicted to beat the passages)")
        if options.get("metric", "ROUGE-L") not in METRICS:
            fail("metric", f"metric {options['metric']!r} is not a reference measure Agent-R can learn from",
                 f"use one of {list(METRICS)}")

    def fingerprint(self) -> str:
        """sha256 of what shapes the candidates and their features, and of how the selector learns."""
        from ikatkit.llm.prompts import template

        llm = {"backend": getattr(self.llm, "backend", None), "model": getattr(self.llm, "model", None),
               "adapter": getattr(self.llm, "adapter_id", None),
               "options": self.llm.identity()}
        parts = {"version": SELECTOR_VERSION, "prompt": template("refine_memory"), "llm": llm, "k": self.k,
                 "passages": self.passages, "sampling": self.sampling, "max_words": self.max_words,
                 "features": FEATURES, "embedding_model": self.embedding_model, "metric": self.metric,
                 "rounds": self.rounds}
        return json_digest(parts, ascii_only=True)

    # -- candidates -------------------------------------------------------------------------------------------
    def propose(self, records: list[TurnRecord], round_: int = 0) -> list[dict[str, Any]]:
        """One trace per record: its passages and ``k`` sampled candidates (text, guard verdict, features)."""
        from ikatkit.llm.guards import check_response
        from ikatkit.llm.prompts import STOPS, render

        ids = [[pid for pid, _ in r.ranking[: self.passages]] for r in records]
        found = self.texts(sorted({pid for group in ids for pid in group}))
        passages = [[found.get(pid, "") for pid in group] for group in ids]
        traces: list[dict[str, Any]] = [{"passages": group, "candidates": [], "degenerate": 0, "chosen": None,
                                         "fallback": None} for group in ids]
        live = [i for i, group in enumerate(passages) if any(t.strip() for t in group)]
        for i in set(range(len(records))) - set(live):
            traces[i]["fallback"] = "no retrieved passages"
        prompts = [render("refine_memory", query=records[i].query or records[i].utterance, passages=passages[i])
                   for i in live]
        outputs = self.llm.sample(prompts, self.k, seed=self.seed * 1000 + round_, stop=STOPS["refine_memory"],
                                  **self.sampling) if prompts else []
        usable: list[tuple[int, dict[str, Any]]] = []
        for i, samples in zip(live, outputs):
            for output in samples:
                text = " ".join(_LABEL.sub("", output.strip(), count=1).split()[: self.max_words])
                problem = check_response(text)
                candidate = {"text": text, "round": round_, "rejected": problem}
                traces[i]["candidates"].append(candidate)
                if problem:
                    traces[i]["degenerate"] += 1
                else:
                    usable.append((i, candidate))
        values = features(self._embed(), [c["text"] for _, c in usable], [passages[i] for i, _ in usable],
                          [records[i].query or records[i].utterance for i, _ in usable])
        for (_, candidate), row in zip(usable, values):
            candidate["features"] = dict(zip(FEATURES, (round(float(v), 6) for v in row)))
        return traces

    def _embed(self) -> Any:
        if self._embedder is None:
            from ikatkit.evaluate.responses import shared_embedder

            self._embedder = shared_embedder(self.embedding_model)
        return self._embedder

    @staticmethod
    def usable(trace: dict[str, Any]) -> list[int]:
        return [n for n, c in enumerate(trace["candidates"]) if c["rejected"] is None]

    def _fall_back(self, record: TurnRecord, trace: dict[str, Any]) -> None:
        trace["fallback"] = trace["fallback"] or "no usable candidate"
        record.memory = ""
        if trace["candidates"]:  # guards refused every candidate: counted like any refused LLM output
            record.notes.append(FALLBACK)
            self.llm.count_fallback(f"{record.qid}: {FALLBACK}")

    # -- inference ----------------------------------------------------------------------------------------------
    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        if self.selector is None:
            raise IkatError("refine_memory has no trained selector", where="selector",
                            fix="train one with `ikatkit partition train-refiner` and name it in selector")
        for record, trace in zip(records, self.propose(records)):
            trace["mode"] = "selector"
            record.memory_trace = trace
            usable = self.usable(trace)
            if not usable:
                self._fall_back(record, trace)
                continue
            predicted = self.selector.predict(np.asarray([[trace["candidates"][n]["features"][f] for f in FEATURES]
                                                          for n in usable]))
            for n, value in zip(usable, predicted):
                trace["candidates"][n]["predicted_gain"] = round(float(value), 6)
            best = usable[int(np.argmax(predicted))]  # first among equals
            if float(np.max(predicted)) > self.min_gain:
                trace["chosen"], record.memory = best, trace["candidates"][best]["text"]
            else:
                record.memory = ""
                trace["kept"] = f"raw passages: no candidate predicted to gain more than {self.min_gain}"
        return records

    # -- training: the boosting loop with the reference -----------------------------------------------------------
    def train(self, records: list[TurnRecord], references: dict[str, str],
              respond: Callable[[list[TurnRecord]], list[TurnRecord]]) -> list[tuple[list[float], float]]:
        """The training hook (:meth:`Stage.train`): Algorithm 1's inner loop for each record against its reference;
        ``respond`` answers copies of records (their ``memory`` set). Sets ``record.memory`` to the kept memory and
        traces every candidate's response, Δ, gain and each round's reward; returns ``(features, gain over the raw
        passages)`` per usable candidate."""
        def answer(memories: list[tuple[int, str]]) -> list[str]:
            copies = []
            for i, memory in memories:
                copy = TurnRecord.from_json(records[i].to_json())
                copy.memory = memory
                copies.append(copy)
            return [r.response for r in respond(copies)] if copies else []

        refs = [references[r.qid] for r in records]
        raw = answer([(i, "") for i in range(len(records))])
        raw_delta = delta(self.metric, raw, refs)
        traces: list[dict[str, Any]] = [{} for _ in records]
        best = list(raw_delta)
        rows: list[tuple[list[float], float]] = []
        for round_ in range(self.rounds):
            pools = self.propose(records, round_)
            tried = [(i, n) for i, pool in enumerate(pools) for n in self.usable(pool)]
            responses = answer([(i, pools[i]["candidates"][n]["text"]) for i, n in tried])
            values = delta(self.metric, responses, [refs[i] for i, _ in tried])
            for (i, n), response, value in zip(tried, responses, values):
                candidate = pools[i]["candidates"][n]
                candidate.update(response=response, delta=round(value, 6), gain=round(value - raw_delta[i], 6))
                rows.append(([candidate["features"][f] for f in FEATURES], value - raw_delta[i]))
            for i, pool in enumerate(pools):
                trace = traces[i]
                if not trace:
                    trace.update(pool, mode="reference", raw_response=raw[i], raw_delta=round(raw_delta[i], 6),
                                 rewards=[])
                else:
                    trace["candidates"].extend(pool["candidates"])
                    trace["degenerate"] += pool["degenerate"]
                offset = len(trace["candidates"]) - len(pool["candidates"])
                usable = self.usable(pool)
                top = max(usable, key=lambda n: (pool["candidates"][n]["delta"], -n), default=None)
                reward = 0.0
                if top is not None and pool["candidates"][top]["delta"] > best[i]:
                    reward = pool["candidates"][top]["delta"] - best[i]
                    best[i], trace["chosen"] = pool["candidates"][top]["delta"], offset + top
                trace["rewards"].append(round(reward, 6))
        for record, trace in zip(records, traces):
            record.memory_trace = trace
            if not self.usable(trace):
                self._fall_back(record, trace)
            else:
                record.memory = trace["candidates"][trace["chosen"]]["text"] if trace["chosen"] is not None else ""
        return rows
