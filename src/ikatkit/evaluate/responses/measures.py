"""Response measures as declared data: a name, what it is scored against, which scorer computes it, its definition.

``needs`` is the input a turn must have to be scored: ``reference`` (a reference response: the topics' canonical
``response`` or a reference file), ``passages`` (the texts of the passages the response marks as used),
``nuggets`` (gold nuggets of the turn), ``rubrics`` (the rubric questions of the turn's topic, 2025; scored per
dialogue by an LLM judge, :mod:`rubrics`), ``simulator`` (the simulated user's recorded rubric and 0-5 judgement
of each answer, with the topic's rubric questions; per dialogue, no LLM) or ``none``. Each kind is computed by one
provider (:mod:`ikatkit.evaluate.responses.providers`). A turn lacking that input gets no value for the measure and
is reported, never scored 0. BERTScore measures are printed with the model and layer
(``BERTScore-R[all-MiniLM-L6-v2:L6]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ikatkit.errors import IkatError

Needs = Literal["reference", "passages", "nuggets", "rubrics", "simulator", "none"]
Scorer = Literal["rouge", "bleu", "tokens", "bertscore", "embedding", "grounding", "citation", "nuggets", "rubrics",
                 "simulator", "length"]


@dataclass(frozen=True)
class ResponseMeasure:
    name: str
    needs: Needs
    scorer: Scorer
    key: str  # the column of the scorer's output
    definition: str


MEASURES: dict[str, ResponseMeasure] = {m.name: m for m in (
    ResponseMeasure("ROUGE-1", "reference", "rouge", "rouge1_f",
                    "ROUGE-1 F1 against the reference (rouge-score, stemmed)"),
    ResponseMeasure("ROUGE-2", "reference", "rouge", "rouge2_f",
                    "ROUGE-2 F1 against the reference (rouge-score, stemmed)"),
    ResponseMeasure("ROUGE-L", "reference", "rouge", "rougeL_f",
                    "ROUGE-L F1 against the reference (rouge-score, stemmed)"),
    ResponseMeasure("ROUGE-1-R", "reference", "rouge", "rouge1_r", "ROUGE-1 recall against the reference"),
    ResponseMeasure("ROUGE-2-R", "reference", "rouge", "rouge2_r", "ROUGE-2 recall against the reference"),
    ResponseMeasure("ROUGE-L-R", "reference", "rouge", "rougeL_r", "ROUGE-L recall against the reference"),
    ResponseMeasure("BLEU", "reference", "bleu", "bleu",
                    "sentence BLEU against the reference, 0-100 (sacrebleu's defaults: 13a tokens, exp smoothing)"),
    ResponseMeasure("Recall", "reference", "tokens", "recall",
                    "share of the reference's tokens found in the response (multiset overlap)"),
    ResponseMeasure("BERTScore-P", "reference", "bertscore", "bert_precision",
                    "BERTScore precision against the reference"),
    ResponseMeasure("BERTScore-R", "reference", "bertscore", "bert_recall", "BERTScore recall against the reference"),
    ResponseMeasure("BERTScore-F1", "reference", "bertscore", "bert_f1", "BERTScore F1 against the reference"),
    ResponseMeasure("EmbedSim", "reference", "embedding", "similarity",
                    "cosine of the response's and the reference's sentence embeddings (MiniLM)"),
    ResponseMeasure("K-Precision", "passages", "tokens", "k_precision",
                    "share of the response's tokens found in its used passages (multiset overlap)"),
    ResponseMeasure("BERTScore-KP", "passages", "bertscore", "k_precision_bert",
                    "BERTScore precision against the best used passage"),
    ResponseMeasure("ROUGE-L-KP", "passages", "grounding", "rougeL_p",
                    "ROUGE-L precision against the used passages joined"),
    ResponseMeasure("CitationCoverage", "passages", "citation", "coverage",
                    "share of the response's sentences whose best used passage reaches the cosine threshold"),
    ResponseMeasure("NuggetRecall", "nuggets", "nuggets", "all",
                    "mean support of the turn's gold nuggets (support 1, partial 0.5, none 0): AutoNuggetizer 'All'"),
    ResponseMeasure("NuggetRecall-strict", "nuggets", "nuggets", "strict_all",
                    "share of the turn's gold nuggets fully supported (partial counts 0)"),
    ResponseMeasure("NuggetRecall-graded", "nuggets", "nuggets", "graded",
                    "support weighted by the nuggets' relevance grades: sum(grade*support) / sum(grade)"),
    ResponseMeasure("VitalRecall", "nuggets", "nuggets", "vital",
                    "mean support of the vital nuggets (grade >= vital_grade); turns without one get no value"),
    ResponseMeasure("VitalRecall-strict", "nuggets", "nuggets", "strict_vital",
                    "share of the vital nuggets fully supported"),
    ResponseMeasure("WeightedRecall", "nuggets", "nuggets", "weighted",
                    "AutoNuggetizer weighted recall: vital weight 1, okay 0.5; sum(weight*support) / sum(weight)"),
    ResponseMeasure("RubricCoverage", "rubrics", "rubrics", "coverage",
                    "share of the topic's rubric questions an LLM judge scores >= 3 (0-5) on the dialogue's best "
                    "response: one value per dialogue (topic), the organizers' 2025 interactive evaluation"),
    ResponseMeasure("RubricScore", "rubrics", "rubrics", "score",
                    "mean over the topic's rubric questions of the judge's best 0-5 score over the dialogue's "
                    "responses"),
    ResponseMeasure("SimRubricScore", "simulator", "simulator", "score",
                    "mean over the topic's rubric questions of the best 0-5 score the simulated user recorded for "
                    "each (0 if never pursued): one value per dialogue, no LLM"),
    ResponseMeasure("SimRubricCoverage", "simulator", "simulator", "coverage",
                    "share of the topic's rubric questions the simulated user scored above 3 (the organizers' "
                    "simulator: it moves on then; --sim-threshold)"),
    ResponseMeasure("SimTurnsToCover", "simulator", "simulator", "turns",
                    "mean over the covered rubric questions of the turns spent on each until it was covered"),
    ResponseMeasure("Words", "none", "length", "words", "words (white-space separated) in the response"),
    ResponseMeasure("Sentences", "none", "length", "sentences", "sentences in the response (rule splitter)"),
    ResponseMeasure("Empty", "none", "length", "empty", "1 for an empty response, else 0 (its mean: share empty)"),
)}

REFERENCE_DEFAULT = ("ROUGE-1", "ROUGE-2", "ROUGE-L", "ROUGE-L-R", "BLEU", "Recall", "BERTScore-R", "BERTScore-F1")
PASSAGE_DEFAULT = ("K-Precision", "BERTScore-KP", "CitationCoverage")
NUGGET_DEFAULT = ("NuggetRecall", "NuggetRecall-graded", "VitalRecall", "WeightedRecall")
RUBRIC_DEFAULT = ("RubricCoverage", "RubricScore")
SIMULATOR_DEFAULT = ("SimRubricScore", "SimRubricCoverage", "SimTurnsToCover")
LENGTH_DEFAULT = ("Words", "Sentences", "Empty")


def parse_response_measures(names: list[str] | tuple[str, ...]) -> list[ResponseMeasure]:
    """The declared measures for ``names`` (a ``[model:layer]`` suffix as printed is accepted and ignored)."""
    out = []
    for name in names:
        measure = MEASURES.get(name.split("[", 1)[0])
        if measure is None:
            raise IkatError(f"unknown response measure {name!r}", where="--measures",
                            fix=f"use some of {', '.join(MEASURES)}")
        out.append(measure)
    return list(dict.fromkeys(out))


def is_response_measure(name: str) -> bool:
    return name.split("[", 1)[0] in MEASURES
