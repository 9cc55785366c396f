"""What a measure provider is: the inputs of one run's evaluation (:class:`Context`), what a provider returns
(:class:`Scored`) and the registry (:func:`register`, :data:`PROVIDERS`), as ir_measures registers its providers.

A provider computes every declared measure that needs one kind of evidence (``needs``: references, passages,
nuggets, rubrics judged by an LLM, the simulator's recorded judgements, or none). Adding a measure of an existing kind
is one :class:`~ikatkit.evaluate.responses.measures.ResponseMeasure` and a key its provider fills; a new kind of
evidence is a new file in this package with one registered provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ikatkit.capabilities import ChatLLM
from ikatkit.evaluate.responses import scorers as sc
from ikatkit.evaluate.responses.data import Nugget, ResponseRun
from ikatkit.evaluate.responses.measures import Needs, ResponseMeasure
from ikatkit.evaluate.responses.nuggets import DEFAULT_THRESHOLD, EmbeddingMatcher
from ikatkit.evaluate.responses.rubrics import Rubric, RubricJudge
from ikatkit.topics import Topics

COVERAGE_THRESHOLD = 0.5
SIM_THRESHOLD = 3  # the organizers' simulated user moves on when its 0-5 score of an answer is above this
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
    llm: ChatLLM | None = None  # the judge of the rubric measures (ikatkit.llm)
    sim_threshold: int = SIM_THRESHOLD  # a rubric the simulated user scored above it is covered
    unreached: str = "skip"  # the Sim means: over the rubrics a user pursued, or "zero" for the others too
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


@dataclass
class Context:
    """One run's evaluation: its turns and responses, the evidence given, the shared models; providers add to
    ``warnings`` and ``info``."""

    run: ResponseRun
    turns: list[str]
    responses: dict[str, str]
    topics: Topics | None
    references: Mapping[str, str]
    nuggets: Mapping[str, list[Nugget]] | None
    passages: Texts | None
    rubrics: Mapping[str, list[Rubric]] | None
    scorers: ResponseScorers
    vital_grade: int
    warnings: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Scored:
    """A provider's values: ``rows`` (turn ids, or topics for measures of whole dialogues) and, per measure key,
    one value per row (None: no value for that row)."""

    rows: list[str]
    values: dict[str, list[float | None]]


class Provider:
    """Computes the declared measures that need one kind of evidence."""

    needs: ClassVar[Needs]
    evidence: ClassVar[str] = ""  # the argument of evaluate_response_runs holding the evidence ("" = none)
    fix: ClassVar[str] = ""  # how to give that evidence
    topic_turns: ClassVar[bool] = False  # its evidence is per topic turn: none applies to an interactive run's turns

    def score(self, measures: list[ResponseMeasure], ctx: Context) -> Scored:
        raise NotImplementedError


PROVIDERS: dict[str, Provider] = {}


def register(cls: type[Provider]) -> type[Provider]:
    """Register one provider per kind of evidence (its ``needs``)."""
    PROVIDERS[cls.needs] = cls()
    return cls
