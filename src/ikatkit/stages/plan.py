"""Source planning (UniMS-RAG's acting tokens): which sources a turn's response needs, PTKB, passages, both or none.

``plan_sources`` sits after the PTKB and passage rankings and before ``respond``. Planners:

- ``always``: every source (today's behaviour, the baseline);
- ``threshold``: the PTKB when the PTKB ranker's best score reaches ``ptkb_threshold``; the passages when the
  ranking's top score reaches ``passage_threshold`` (always, when it is not set). Tuned on the 2023 train topics
  by ``bench/tune_plan_threshold.py``;
- ``llm``: the LLM answers the prompt ``prompts/plan_sources.txt`` with ``[SOURCE] NULL|PTKB|PASSAGES|PTKB, PASSAGES
  [EOS]``, parsed strictly (:func:`ikatkit.llm.parse.parse_sources`); an output that does not parse is a counted
  fallback to ``always`` for that turn (noted on the record, kept in ``rejected``, counted in the manifest).

The plan is ``record.sources`` (``[]`` = NULL) with its scores in ``record.plan``. A turn planned without the PTKB
has its PTKB list emptied (the ranked statements stay in ``record.plan["ptkb"]``): no statement reaches the response
prompt or the run's ``ptkb_provenance``. The passage ranking is never changed: the official run keeps it on every
turn (the track evaluates it); a turn planned without passages gets none in its prompt and marks none used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ikatkit.capabilities import ChatLLM
from ikatkit.errors import IkatError
from ikatkit.pipelines.base import Stage, prompt_context, reject
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.registry import register

PLANNERS = ("always", "threshold", "llm")
ALL_SOURCES = ["ptkb", "passages"]
PLAN_TOKENS = 16  # new tokens an LLM plan may take: "[SOURCE] PTKB, PASSAGES [EOS]" is 12 SmolLM2 tokens


def decision(sources: Sequence[str]) -> str:
    """The plan in UniMS-RAG's source tokens: ``NULL``, ``PTKB``, ``PASSAGES`` or ``PTKB, PASSAGES``."""
    return ", ".join(s.upper() for s in sources) or "NULL"


@register
class PlanSources(Stage):
    """Plan the sources of each turn's response (see the module's docstring)."""

    name = "plan_sources"
    requires = ("ptkb", "ranking")
    ordered = ("context_ids",)  # the llm planner's prompt
    summary_key = "plan"
    provides = ("sources", "plan", "ptkb")

    def __init__(self, planner: str = "always", llm: ChatLLM | None = None, ptkb_threshold: float | None = None,
                 passage_threshold: float | None = None) -> None:
        self.check({"planner": planner, "llm": llm, "ptkb_threshold": ptkb_threshold,
                    "passage_threshold": passage_threshold})
        self.planner, self.llm = planner, llm
        self.ptkb_threshold, self.passage_threshold = ptkb_threshold, passage_threshold

    @classmethod
    def summary(cls, records: Sequence[TurnRecord], seconds: float | None) -> dict[str, Any] | None:
        return plan_summary(records)

    @classmethod
    def ordered_reads(cls, options: dict[str, Any]) -> tuple[str, ...]:
        return cls.ordered if options.get("planner", "always") == "llm" else ()

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        """The planner exists and has what it needs; thresholds only for the threshold planner."""
        planner = options.get("planner", "always")
        if planner not in PLANNERS:
            raise IkatError(f"unknown planner {planner!r}", where="planner", fix=f"use one of {PLANNERS}")
        if planner == "threshold" and options.get("ptkb_threshold") is None:
            raise IkatError("the threshold planner needs ptkb_threshold", where="planner",
                            fix="add ptkb_threshold = ... (tuned on train: bench/tune_plan_threshold.py)")
        if planner != "threshold":
            for key in ("ptkb_threshold", "passage_threshold"):
                if options.get(key) is not None:
                    raise IkatError(f"{key} is only read by the threshold planner", where=key,
                                    fix=f'remove {key}, or set planner = "threshold"')
        if planner == "llm" and options.get("llm") is None:
            raise IkatError("the llm planner needs an LLM and the config declares none", where="planner",
                            fix='declare one ([resources.llm] kind = "llm")')

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        outputs = self._llm_outputs(records) if self.planner == "llm" else [None] * len(records)
        for record, output in zip(records, outputs):
            best_ptkb = record.ptkb[0][1] if record.ptkb else None
            best_passage = record.ranking[0][1] if record.ranking else None
            plan: dict[str, Any] = {"planner": self.planner, "ptkb_score": best_ptkb, "passage_score": best_passage,
                                    "fallback": False}
            if self.planner == "threshold":
                assert self.ptkb_threshold is not None  # check() refuses the threshold planner without it
                sources = [s for s, needed in (
                    ("ptkb", best_ptkb is not None and best_ptkb >= self.ptkb_threshold),
                    ("passages", self.passage_threshold is None
                     or (best_passage is not None and best_passage >= self.passage_threshold))) if needed]
            elif self.planner == "llm":
                parsed = self._parse(record, output or "")
                plan.update(output=output, fallback=parsed is None)
                sources = list(ALL_SOURCES) if parsed is None else parsed
            else:
                sources = list(ALL_SOURCES)
            plan["decision"] = decision(sources)
            if "ptkb" not in sources and record.ptkb:
                plan["ptkb"] = [[key, score] for key, score in record.ptkb]
                record.ptkb = []
            record.sources, record.plan = sources, plan
        return records

    def _llm_outputs(self, records: list[TurnRecord]) -> list[str]:
        from ikatkit.llm.prompts import STOPS, render
        assert self.llm is not None  # check() refuses the llm planner without an LLM
        prompts = [render("plan_sources", **prompt_context(r)) for r in records]
        return self.llm.chat(prompts, stop=STOPS["plan_sources"], max_new_tokens=PLAN_TOKENS) if prompts else []

    def _parse(self, record: TurnRecord, output: str) -> list[str] | None:
        from ikatkit.llm.parse import parse_sources
        sources = parse_sources(output)
        if sources is None:
            assert self.llm is not None  # only the llm planner parses
            reject(record, self.llm, self.name, output, "unparsable source plan: every source used")
        return sources


def plan_summary(records: Sequence[TurnRecord]) -> dict[str, Any] | None:
    """For the manifest: turns planned, how many per decision, LLM plans that fell back (None without a plan)."""
    planned = [r for r in records if r.plan]
    if not planned:
        return None
    decisions = [r.plan["decision"] for r in planned]
    return {"turns": len(planned), "planner": planned[0].plan["planner"],
            "decisions": {d: decisions.count(d) for d in sorted(set(decisions))},
            "turns_with_ptkb": sum("ptkb" in (r.sources or []) for r in planned),
            "fallbacks": sum(bool(r.plan.get("fallback")) for r in planned)}
