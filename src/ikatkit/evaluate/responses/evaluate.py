"""``evaluate_responses``: the declared response measures of runs, per turn and mean, as an ``EvalResult``."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import EvalResult
from ikatkit.evaluate.responses.data import (Nugget, ResponseRun, load_passages, read_nuggets, read_references,
                                             read_response_runs, response_run)
from ikatkit.evaluate.responses.measures import (LENGTH_DEFAULT, NUGGET_DEFAULT, PASSAGE_DEFAULT, REFERENCE_DEFAULT,
                                                 RUBRIC_DEFAULT, SIMULATOR_DEFAULT, ResponseMeasure,
                                                 parse_response_measures)
from ikatkit.evaluate.responses.nuggets import VITAL_GRADE
from ikatkit.evaluate.responses.providers import PROVIDERS, Context, ResponseScorers
from ikatkit.evaluate.responses.providers.base import COVERAGE_THRESHOLD, Texts
from ikatkit.evaluate.responses.rubrics import Rubric, read_rubrics, topic_of
from ikatkit.runs.model import Run
from ikatkit.runs.templates import load_template
from ikatkit.topics import Topics

__all__ = ["COVERAGE_THRESHOLD", "MAX_WORDS", "ResponseScorers", "default_measures", "evaluate_response_runs",
           "evaluate_responses"]
log = logging.getLogger(__name__)
# The track's limit, from the 2025 template: longer responses are trimmed by the organizers and counted here.
MAX_WORDS = load_template(2025).limit("max_words", "responses[].text")


def _label(measure: ResponseMeasure, scorers: ResponseScorers) -> str:
    return f"{measure.name}[{scorers.bert.label}]" if measure.scorer == "bertscore" else measure.name


def _as_run(run: ResponseRun | Run | str | Path, topics: Topics | None) -> ResponseRun:
    if isinstance(run, ResponseRun):
        return run
    if isinstance(run, Run):
        return response_run(run)
    runs = read_response_runs(run, topics)
    if len(runs) != 1:
        raise IkatError(f"the file holds {len(runs)} runs", path=run, fix="use evaluate_response_runs for it")
    return runs[0]


def default_measures(references: bool, passages: bool, nuggets: bool, rubrics: bool = False,
                     judged: bool = False, judge: bool = False) -> list[str]:
    """The measures the given inputs allow: reference, grounding, nugget defaults; with rubrics, the simulator's
    (runs that record its judgements) and the LLM judge's (with an LLM); then length."""
    return [*(REFERENCE_DEFAULT if references else ()), *(PASSAGE_DEFAULT if passages else ()),
            *(NUGGET_DEFAULT if nuggets else ()), *(SIMULATOR_DEFAULT if rubrics and judged else ()),
            *(RUBRIC_DEFAULT if rubrics and (judge or not judged) else ()), *LENGTH_DEFAULT]


def evaluate_response_runs(runs: Mapping[str, ResponseRun | Run | str | Path] | Sequence[ResponseRun], *,
                           topics: Topics | None = None, references: Mapping[str, str] | str | Path | None = None,
                           nuggets: Mapping[str, list[Nugget]] | str | Path | None = None,
                           passages: Texts | str | Path | None = None, index: str | Path | None = None,
                           rubrics: Mapping[str, list[Rubric]] | str | Path | None = None,
                           measures: Sequence[str] | None = None, scorers: ResponseScorers | None = None,
                           vital_grade: int = VITAL_GRADE, missing: str = "skip",
                           max_words: int = MAX_WORDS) -> dict[str, EvalResult]:
    """Each run's response measures (models loaded once for all runs). See :func:`evaluate_responses`."""
    if isinstance(references, (str, Path)):
        references = read_references(references)
    elif references is None and topics is not None:
        references = {t.qid: t.response for t in topics if t.response}
    if isinstance(nuggets, (str, Path)):
        nuggets = read_nuggets(nuggets)
    if isinstance(rubrics, (str, Path)):
        rubrics = read_rubrics(rubrics)
    if isinstance(passages, (str, Path)):
        passages = load_passages([passages], index)
    elif index is not None:
        passages = load_passages([], index)
    scorers = scorers or ResponseScorers()
    if isinstance(runs, Mapping):
        items = {name: replace(_as_run(run, topics), name=name) for name, run in runs.items()}
    else:
        items = {r.name: r for r in runs}
    judged = any(r.judged for r in items.values())
    offline = not all(r.interactive for r in items.values())  # interactive turns have no turn-level references
    names = list(measures or default_measures(bool(references) and offline, passages is not None,
                                              nuggets is not None and offline, bool(rubrics), judged,
                                              scorers.llm is not None))
    declared = parse_response_measures(names)
    evidence = {"references": references, "passages": passages, "nuggets": nuggets, "rubrics": rubrics}
    for measure in declared:
        provider = PROVIDERS[measure.needs]
        if provider.evidence and not evidence[provider.evidence]:
            raise IkatError(f"{measure.name} needs {measure.needs}", where="--measures", fix=provider.fix)
    if any(m.needs == "rubrics" for m in declared):
        scorers.rubric_judge()  # no LLM: the error now, before any model loads
    return {name: _evaluate(run, declared, scorers, topics, references or {}, nuggets, passages, vital_grade,
                            missing, max_words, rubrics) for name, run in items.items()}


def evaluate_responses(run: ResponseRun | Run | str | Path, **options: Any) -> EvalResult:
    """The response measures of one run, per turn and mean, as ranking evaluation returns them.

    ``topics`` (canonical responses as references, the turns that exist), ``references`` (a file or
    ``{turn: text}``), ``nuggets`` (gold-nugget file or dict), ``passages`` (JSONL or ``texts(ids)``) / ``index``,
    ``measures`` (names of :mod:`measures`; default: all the inputs allow), ``scorers`` (shared models),
    ``missing`` (``skip``: turns the run lacks are listed; ``zero``: scored as an empty response).
    ``info`` names the models, the matcher, the turns without nuggets and the counted warnings.
    """
    run = _as_run(run, options.get("topics"))
    return evaluate_response_runs([run], **options)[run.name]


def _known_turns(run: ResponseRun, topics: Topics | None, references: Mapping[str, str],
                 nuggets: Mapping[str, list[Nugget]] | None, rubrics: Mapping[str, list[Rubric]] | None) -> set[str]:
    """The run's turns that can be evaluated: the topics' turns (an interactive run's turns are its users', so any
    turn of a topic's conversation), else the nugget file's or references', plus those of topics with rubrics."""
    if topics is not None:
        conversations = {c.id for c in topics.conversations}
        known = {q for q in run.responses if topic_of(q) in conversations} if run.interactive else set(topics.qids)
    else:
        known = set(nuggets) if nuggets is not None else set(references)
    if rubrics and (topics is None or run.interactive):
        known |= {q for q in run.responses if topic_of(q) in rubrics}
    return known


def _evaluate(run: ResponseRun, declared: list[ResponseMeasure], scorers: ResponseScorers, topics: Topics | None,
              references: Mapping[str, str], nuggets: Mapping[str, list[Nugget]] | None, passages: Texts | None,
              vital_grade: int, missing: str, max_words: int,
              rubrics: Mapping[str, list[Rubric]] | None = None) -> EvalResult:
    warnings: list[str] = []
    known = _known_turns(run, topics, references, nuggets, rubrics)
    unknown = [q for q in run.responses if q not in known]
    if topics is not None and len(unknown) * 2 > len(run.responses):  # as `validate` says it (wrong-topics)
        raise IkatError(f"{len(unknown)} of the {len(run.responses)} turns of run {run.name} are not in these "
                        f"{topics.year} topics (e.g. {', '.join(unknown[:3])})", path=topics.path,
                        fix="pass the topics the run answers (--topics): another year's, or train instead of test")
    if unknown:
        source = ("topics" if topics is not None else "nugget file" if nuggets is not None
                  else "references or rubrics" if rubrics else "references")
        warnings.append(f"{len(unknown)} turns of run {run.name} are not in the {source}, skipped "
                        f"(e.g. {', '.join(unknown[:3])})")
    turns = [q for q in run.responses if q in known]
    if not turns:
        raise IkatError(f"no turn of run {run.name} is in the {'topics' if topics else 'nugget file or references'}",
                        fix="pass the topics, nuggets or references of the run's year")
    needs = {m.needs for m in declared}
    judged = [q for q in known if ("nuggets" in needs and nuggets and nuggets.get(q))
              or ("reference" in needs and references.get(q))]
    lacking = [q for q in judged if q not in run.responses]
    responses = dict(run.responses)
    if missing == "zero":
        responses.update({q: "" for q in lacking})
        turns += lacking
    long = [q for q in turns if len(responses[q].split()) > max_words]
    if long:
        warnings.append(f"{len(long)} responses of run {run.name} are longer than {max_words} words (scored as "
                        f"given; the organizers trim them), e.g. {', '.join(long[:3])}")
    ctx = Context(run, turns, responses, topics, references, nuggets, passages, rubrics, scorers, vital_grade,
                  warnings)
    per_query: dict[str, dict[str, float]] = {q: {} for q in turns}
    groups: dict[str, list[ResponseMeasure]] = {}
    for measure in declared:
        groups.setdefault(measure.needs, []).append(measure)
    for kind, measures in groups.items():
        provider = PROVIDERS[kind]
        if provider.topic_turns and run.interactive:
            warnings.append(f"run {run.name} is interactive: its turns are the simulated user's, not the topics', "
                            f"so the topics' {provider.evidence} do not apply (no {provider.evidence} measures)")
            continue
        scored = provider.score(measures, ctx)
        for measure in measures:
            label = _label(measure, scorers)
            for q, value in zip(scored.rows, scored.values.get(measure.key, [])):
                if value is not None:
                    per_query.setdefault(q, {})[label] = float(value)  # a dialogue's row: keyed by its topic
    info = ctx.info
    if any(m.scorer == "bertscore" for m in declared):
        info["bertscore"] = {"model": scorers.bert.model, "layer": scorers.bert.layer, "label": scorers.bert.label}
    if any(m.scorer in ("embedding", "citation") for m in declared):
        info["embedding_model"] = scorers.embedder.label
    for warning in warnings:
        log.warning(warning)
    info["warnings"] = warnings
    mean = {}
    for label in [_label(m, scorers) for m in declared]:
        column = [v[label] for v in per_query.values() if label in v]
        if column:  # a measure no turn has a value of is absent (its warning says why), never 0
            mean[label] = sum(column) / len(column)
    per_query = {q: v for q, v in per_query.items() if v}
    dialogues = [q for q in per_query if q not in responses]  # rows of whole dialogues, keyed by topic: no turns
    if dialogues:
        info["dialogues"] = dialogues
    evaluated = [q for q in per_query if q in responses]
    return EvalResult(mean, per_query, evaluated, [] if missing == "zero" else lacking, info)
