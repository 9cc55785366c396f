"""``evaluate_responses``: the declared response measures of runs, per turn and mean, as an ``EvalResult``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import EvalResult
from ikatkit.evaluate.responses import scorers as sc
from ikatkit.evaluate.responses.data import (Nugget, ResponseRun, load_passages, read_nuggets, read_references,
                                             read_response_runs, response_run)
from ikatkit.evaluate.responses.measures import (LENGTH_DEFAULT, NUGGET_DEFAULT, PASSAGE_DEFAULT, REFERENCE_DEFAULT,
                                                 RUBRIC_DEFAULT,
                                                 ResponseMeasure, parse_response_measures)
from ikatkit.evaluate.responses.nuggets import DEFAULT_THRESHOLD, VITAL_GRADE, EmbeddingMatcher, nugget_scores
from ikatkit.evaluate.responses.rubrics import Rubric, RubricJudge, read_rubrics, rubric_scores, topic_of
from ikatkit.runs.model import Run
from ikatkit.topics import Topics

log = logging.getLogger(__name__)
MAX_WORDS = 250  # the track's limit: longer responses are trimmed by the organizers (2025) and counted here
COVERAGE_THRESHOLD = 0.5
Texts = Callable[[list[str]], dict[str, str]]


@dataclass
class ResponseScorers:
    """The models of response evaluation, loaded on first use and shared by every run evaluated with them."""

    bert_model: str = sc.DEFAULT_MODEL
    bert_layer: int | None = None
    embed_model: str = sc.DEFAULT_MODEL
    matcher: Any = None  # LlmMatcher, or None: an EmbeddingMatcher at nugget_threshold
    nugget_threshold: float = DEFAULT_THRESHOLD
    coverage_threshold: float = COVERAGE_THRESHOLD
    llm: Any = None  # the judge of the rubric measures (ikatkit.llm)
    _bert: sc.BertScore | None = field(default=None, init=False, repr=False)
    _embedder: sc.Embedder | None = field(default=None, init=False, repr=False)

    @property
    def bert(self) -> sc.BertScore:
        if self._bert is None:
            self._bert = sc.BertScore(self.bert_model, self.bert_layer)
        return self._bert

    @property
    def embedder(self) -> sc.Embedder:
        if self._embedder is None:
            self._embedder = sc.Embedder(self.embed_model)
        return self._embedder

    def rubric_judge(self) -> RubricJudge:
        """The LLM judge of the rubric measures; an IkatError without an LLM (never a silent zero)."""
        return RubricJudge(self.llm)

    def nugget_matcher(self) -> Any:
        if self.matcher is None:
            self.matcher = EmbeddingMatcher(self.embedder, self.nugget_threshold)
        return self.matcher


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


def default_measures(references: bool, passages: bool, nuggets: bool, rubrics: bool = False) -> list[str]:
    """The measures the given inputs allow: reference, grounding, nugget and rubric defaults, then length."""
    return [*(REFERENCE_DEFAULT if references else ()), *(PASSAGE_DEFAULT if passages else ()),
            *(NUGGET_DEFAULT if nuggets else ()), *(RUBRIC_DEFAULT if rubrics else ()), *LENGTH_DEFAULT]


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
    if isinstance(passages, (str, Path)) or index is not None:
        passages = load_passages([passages] if isinstance(passages, (str, Path)) else [], index)
    names = list(measures or default_measures(bool(references), passages is not None, nuggets is not None,
                                              bool(rubrics)))
    declared = parse_response_measures(names)
    for measure in declared:
        given = {"reference": references, "passages": passages, "nuggets": nuggets,
                 "rubrics": rubrics}.get(measure.needs, True)
        if not given:
            fix = {"reference": "pass --topics (canonical responses) or --references",
                   "passages": "pass --passages JSONL or --index", "nuggets": "pass --nuggets",
                   "rubrics": "pass --rubrics (rubrics.csv)"}[measure.needs]
            raise IkatError(f"{measure.name} needs {measure.needs}", where="--measures", fix=fix)
    scorers = scorers or ResponseScorers()
    if any(m.needs == "rubrics" for m in declared):
        scorers.rubric_judge()  # no LLM: the error now, before any model loads
    if isinstance(runs, Mapping):
        items = {name: _as_run(run, topics) for name, run in runs.items()}
        items = {name: ResponseRun(name, r.responses, r.used) for name, r in items.items()}
    else:
        items = {r.name: r for r in runs}
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


def _evaluate(run: ResponseRun, declared: list[ResponseMeasure], scorers: ResponseScorers, topics: Topics | None,
              references: Mapping[str, str], nuggets: Mapping[str, list[Nugget]] | None, passages: Texts | None,
              vital_grade: int, missing: str, max_words: int,
              rubrics: Mapping[str, list[Rubric]] | None = None) -> EvalResult:
    warnings: list[str] = []
    known = set(topics.qids) if topics is not None else set(nuggets) if nuggets is not None else set(references)
    if topics is None and rubrics:
        known |= {q for q in run.responses if topic_of(q) in rubrics}
    unknown = [q for q in run.responses if q not in known]
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
    per_query: dict[str, dict[str, float]] = {q: {} for q in turns}
    info: dict[str, Any] = {}
    groups: dict[str, list[ResponseMeasure]] = {}
    for measure in declared:
        groups.setdefault(measure.needs, []).append(measure)
    for needs, measures in groups.items():
        if needs == "reference":
            scored = [q for q in turns if references.get(q, "").strip()]
            values = _reference_values(measures, scorers, [responses[q] for q in scored],
                                       [references[q] for q in scored])
        elif needs == "passages":
            assert passages is not None
            found: dict[str, list[str]] = {}
            for q in turns:
                texts = passages(run.used.get(q, []))
                found[q] = [texts[p] for p in run.used.get(q, []) if p in texts]
            scored = [q for q in turns if found[q]]
            if len(scored) < len(turns):
                warnings.append(f"{len(turns) - len(scored)} turns of run {run.name} have no used passage with a "
                                "text (not in the passages or index): no grounding measures for them")
            values = _passage_values(measures, scorers, [responses[q] for q in scored], [found[q] for q in scored])
        elif needs == "nuggets":
            assert nuggets is not None
            scored = [q for q in turns if nuggets.get(q)]
            info["turns_without_nuggets"] = [q for q in turns if not nuggets.get(q)]
            matcher = scorers.nugget_matcher()
            info["nugget_matcher"] = matcher.label
            queries = [topics.turn(q).resolved_utterance or topics.turn(q).utterance for q in scored] if topics else None
            support = matcher.support([responses[q] for q in scored], [nuggets[q] for q in scored], queries)
            rows = [nugget_scores(nuggets[q], s, vital_grade) for q, s in zip(scored, support)]
            values = {m.key: [row.get(m.key) for row in rows] for m in measures}
        elif needs == "rubrics":
            assert rubrics is not None
            judge = scorers.rubric_judge()
            by_topic = rubric_scores({q: responses[q] for q in turns}, rubrics, judge)
            info["rubric_judge"] = judge.label
            info["rubric_scores"] = {topic: row["scores"] for topic, row in by_topic.items()}
            info["topics_without_rubrics"] = sorted({topic_of(q) for q in turns} - set(by_topic))
            for topic in by_topic:
                per_query.setdefault(topic, {})  # one row per dialogue, keyed by its topic
            scored = list(by_topic)
            values = {m.key: [by_topic[t][m.key] for t in scored] for m in measures}
        else:
            scored = turns
            texts = [responses[q] for q in turns]
            values = {"words": [float(len(t.split())) for t in texts],
                      "sentences": [float(len(sc.sentences(t))) for t in texts],
                      "empty": [float(not t.strip()) for t in texts]}
        for measure in measures:
            label = _label(measure, scorers) if measure.scorer == "bertscore" else measure.name
            for q, value in zip(scored, values[measure.key]):
                if value is not None:
                    per_query[q][label] = float(value)
    if any(m.scorer == "bertscore" for m in declared):
        info["bertscore"] = {"model": scorers.bert.model, "layer": scorers.bert.layer, "label": scorers.bert.label}
    if any(m.scorer in ("embedding", "citation") for m in declared):
        info["embedding_model"] = scorers.embedder.label
    for warning in warnings:
        log.warning(warning)
    info["warnings"] = warnings
    labels = [_label(m, scorers) if m.scorer == "bertscore" else m.name for m in declared]
    mean = {}
    for label in labels:
        column = [v[label] for v in per_query.values() if label in v]
        mean[label] = sum(column) / len(column) if column else 0.0
    per_query = {q: v for q, v in per_query.items() if v}
    return EvalResult(mean, per_query, list(per_query), [] if missing == "zero" else lacking, info)


def _reference_values(measures: list[ResponseMeasure], scorers: ResponseScorers, responses: list[str],
                      references: list[str]) -> dict[str, list[float]]:
    kinds = {m.scorer for m in measures}
    values: dict[str, list[float]] = {}
    if "rouge" in kinds:
        values.update(sc.rouge(responses, references))
    if "tokens" in kinds:
        values["recall"] = sc.token_recall(responses, references)
    if "bertscore" in kinds:
        values.update({f"bert_{k}": v for k, v in scorers.bert.score(responses, references).items()})
    if "embedding" in kinds:
        values["similarity"] = scorers.embedder.similarity(responses, references)
    return values


def _passage_values(measures: list[ResponseMeasure], scorers: ResponseScorers, responses: list[str],
                    passages: list[list[str]]) -> dict[str, list[float]]:
    kinds = {m.scorer for m in measures}
    values: dict[str, list[float]] = {}
    if "tokens" in kinds:
        values["k_precision"] = sc.k_precision(responses, passages)
    if "bertscore" in kinds:
        values["k_precision_bert"] = scorers.bert.k_precision(responses, passages)
    if "grounding" in kinds:
        values["rougeL_p"] = sc.rouge_l_grounding(responses, passages)
    if "citation" in kinds:
        values["coverage"] = sc.citation_coverage(scorers.embedder, responses, passages, scorers.coverage_threshold)
    return values
