"""NIST's interactive dimensions judged by an LLM, and any judge's agreement with NIST's labels.

The judge rates each dimension of the assessors' forms on the forms' ordinal scale (1-5, 5 best) with one prompt per
dimension (``llm/prompts/nist_*.txt``, our wording of the forms' category tables): dialogue level (mixed-initiative
strategies, personalization, information flow and coherence, trustworthiness, overall user satisfaction) over the
whole conversation, fragment level (engagement, relevance and usefulness, overall subtopic quality) over the turns
of one rubric, with the earlier turns as context. An output naming no value of the scale is a parse fallback
(counted on the LLM) and no label: it is left out of the agreement and counted there.

:func:`dialogue_agreement` compares a judge's values with NIST's per dimension: exact and within-one agreement,
Cohen's kappa (:func:`ikatkit.evaluate.responses.agreement.kappa`) and its quadratic-weighted form (scikit-learn)
with a percentile bootstrap 95% interval over units, the means, and Kendall's tau (scipy) over runs' means.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ikatkit.capabilities import ChatLLM
from ikatkit.errors import IkatError
from ikatkit.textfile import read_text
from ikatkit.evaluate.assessments import DIALOG_FORM, Assessment, Form
from ikatkit.evaluate.responses.agreement import BOOTSTRAP, kappa

TASK_OF = {"mixed-initiative-strategies": "nist_mixed_initiative", "personalization": "nist_personalization",
           "information-flow-and-coherence": "nist_information_flow", "trustworthiness": "nist_trustworthiness",
           "overall-user-satisfaction": "nist_satisfaction", "engagement": "nist_engagement",
           "relevance-and-usefulness": "nist_relevance", "overall-subtopic-quality": "nist_subtopic_quality"}


def transcript(turns: Sequence[Any]) -> str:
    """``User: ...`` / ``Assistant: ...`` lines of turns (a farewell has no answer)."""
    lines = []
    for turn in turns:
        lines.append(f"User: {' '.join(turn.user.split())}")
        if turn.text:
            lines.append(f"Assistant: {' '.join(turn.text.split())}")
    return "\n".join(lines) or "(none)"


def parse_value(output: str, top: int) -> int | None:
    """The first number 1..``top`` standing alone in a judge's output, else None."""
    match = re.search(rf"(?<![\d.])([1-{top}])(?!\d|\.\d)", output)
    return int(match.group(1)) if match else None


class DialogueJudge:
    """Rates assessed units (:class:`~ikatkit.evaluate.assessments.Assessment`) with an LLM of ``ikatkit.llm``."""

    def __init__(self, llm: ChatLLM, forms: dict[str, Form], max_new_tokens: int = 4) -> None:
        self.llm, self.forms, self.max_new_tokens = llm, forms, max_new_tokens
        self.label = f"LLM {llm.backend}:{llm.model}"

    def judge(self, units: Sequence[Assessment], dialogues: Sequence[Assessment] = (),
              ptkb: dict[str, list[str]] | None = None) -> list[dict[str, int | None]]:
        """Each unit's value per rated dimension of its form. A fragment's context is the earlier turns of the
        same run's dialogue entry (from ``units`` or ``dialogues``); ``ptkb``: statements by topic (default: those
        the run's answers cite)."""
        from ikatkit.llm.prompts import render

        whole = {(a.run, a.topic): a for a in (*dialogues, *units) if a.form == DIALOG_FORM}
        batch, slots = [], []
        for i, unit in enumerate(units):
            first = min(t.turn for t in unit.turns) if unit.turns else 0
            earlier = [t for t in (whole.get((unit.run, unit.topic)) or unit).turns if t.turn < first]
            statements = (ptkb or {}).get(unit.topic) or list(dict.fromkeys(s for t in unit.turns for s in t.ptkb))
            rubric = next((t.rubric for t in unit.turns if t.rubric), None) or "(not given)"
            for question in self.forms[unit.form].scales:
                if question.id not in TASK_OF:
                    raise IkatError(f"no prompt for question {question.id!r} of form {unit.form}",
                                    fix=f"the judge rates {sorted(TASK_OF)}")
                batch.append(render(TASK_OF[question.id], response=transcript(unit.turns), query=rubric,
                                    answer=transcript(earlier), ptkb=statements))
                slots.append((i, question.id, len(question.options)))
        out: list[dict[str, int | None]] = [{} for _ in units]
        for (i, qid, top), output in zip(slots, self.llm.chat(batch, max_new_tokens=self.max_new_tokens)
                                         if batch else []):
            value = parse_value(output, top)
            if value is None:
                self.llm.count_fallback(f"{qid} value not understood: no label")
            out[i][qid] = value
        return out


def _bootstrap(human: np.ndarray, judge: np.ndarray, bootstrap: int, seed: int) -> tuple[float, float]:
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(bootstrap):
        i = rng.integers(0, len(human), len(human))
        both = set(human[i].tolist()) | set(judge[i].tolist())
        draws.append(float(cohen_kappa_score(human[i], judge[i], weights="quadratic")) if len(both) > 1 else 0.0)
    return (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))) if draws else (0.0, 0.0)


def dialogue_agreement(nist: Sequence[Assessment], judged: Sequence[dict[str, int | None]], forms: dict[str, Form],
                       bootstrap: int = BOOTSTRAP, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per dimension: the judge's values (``judged[i]`` for unit ``nist[i]``) against NIST's (see the module)."""
    from scipy.stats import kendalltau
    from sklearn.metrics import cohen_kappa_score

    report: dict[str, dict[str, Any]] = {}
    for form in {a.form for a in nist}:
        for question in forms[form].scales:
            pairs = [(a.values[question.id], j.get(question.id), a.run) for a, j in zip(nist, judged)
                     if a.form == form and question.id in a.values]
            kept = [(h, v, r) for h, v, r in pairs if v is not None]
            row: dict[str, Any] = {"form": form, "units": len(pairs), "no_label": len(pairs) - len(kept)}
            if kept:
                h, v = np.array([k[0] for k in kept]), np.array([k[1] for k in kept])
                runs = list(dict.fromkeys(k[2] for k in kept))
                means = [(h[[k[2] == r for k in kept]].mean(), v[[k[2] == r for k in kept]].mean()) for r in runs]
                tau = kendalltau(*zip(*means)).statistic if len(runs) > 1 else float("nan")
                weighted = (float(cohen_kappa_score(h, v, weights="quadratic"))
                            if len(set(h.tolist()) | set(v.tolist())) > 1 else 0.0)
                row.update({"exact": float((h == v).mean()), "within_one": float((abs(h - v) <= 1).mean()),
                            "kappa": kappa(h.tolist(), v.tolist()), "weighted_kappa": weighted,
                            "weighted_kappa_ci": list(_bootstrap(h, v, bootstrap, seed)),
                            "nist_mean": float(h.mean()), "judge_mean": float(v.mean()),
                            "runs": len(runs), "run_tau": None if np.isnan(tau) else float(tau)})
            report[question.id] = row
    return report


def judged_records(units: Sequence[Assessment], judged: Sequence[dict[str, int | None]], judge: str) -> list[dict]:
    """A judge's labels as JSON records (what :func:`read_judged` reads back)."""
    return [{"run": a.run, "topic": a.topic, "form": a.form, "turns": [t.turn for t in a.turns], "judge": judge,
             "values": values} for a, values in zip(units, judged)]


def read_judged(path: str, units: Sequence[Assessment]) -> list[dict[str, int | None]]:
    """A judge's labels (JSON Lines of :func:`judged_records`) aligned to ``units``; a unit the file lacks gets
    no labels (counted as ``no_label``), records of other units are passed over (the file may cover more units
    than were selected), a malformed record is an IkatError naming its line."""
    import json
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise IkatError("judge label file not found", path=file, fix="pass a file of `eval-dialogues --labels-out`")
    wanted = {a.key: i for i, a in enumerate(units)}
    out: list[dict[str, int | None]] = [{} for _ in units]
    for number, line in enumerate(read_text(file).splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            turns = tuple(int(t) for t in record["turns"])
            key = (str(record["run"]), str(record["topic"]), str(record["form"]), turns)
            values = {str(k): None if v is None else int(v) for k, v in record["values"].items()}
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise IkatError(f"not a judge label record ({err})", path=file, where=f"line {number}",
                            fix='one JSON object a line: {"run", "topic", "form", "turns", "values"}') from None
        if key in wanted:
            out[wanted[key]] = values
    return out
