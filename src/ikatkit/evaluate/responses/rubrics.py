"""Rubric coverage of dialogues (iKAT 2025 interactive evaluation): an LLM judge scores answers against rubric
questions.

The organizers' simulator scores how well a system answer covers a rubric question on 0-5 with an LLM and counts a
rubric covered at 3 or more. Here a dialogue (all responses of one topic: an interactive run's dump or an offline
conversation) scores each of its topic's rubric questions by its best response (the judge sees one response at a
time, the ``rubric_score`` prompt: our wording of the organizers' 0-5 scale, one number out):

- ``RubricCoverage``: share of the topic's rubric questions whose best score is >= ``COVERED`` (3);
- ``RubricScore``: mean best score (0-5) over the topic's rubric questions.

The 0-5 score of every rubric is kept (``info["rubric_scores"]``). An output naming no score 0-5 counts as a parse
fallback of the LLM and scores 0 (counted, reported). Without an LLM: one IkatError, never a zero.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ikatkit.capabilities import ChatLLM
from ikatkit.errors import IkatError
from ikatkit.textfile import open_text, read_text

COVERED = 3
RUBRIC_ID = re.compile(r"(.+)-r(\d+)")


@dataclass(frozen=True)
class Rubric:
    id: str  # 1-1-r3
    topic: str  # 1-1
    question: str


def read_rubrics(path: str | Path) -> dict[str, list[Rubric]]:
    """Rubric questions by topic from the released ``rubrics.json`` (``{topic: [questions]}``; ids ``{topic}-r{n}``
    in list order), the simulation data's ``"id","rubrik"`` CSV (rubrics.csv, assessed-rubrics.csv) or a topics
    file (JSON list: each turn's information need, :func:`_topic_rubrics`)."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("rubric file not found", path=path,
                        fix="pass rubrics.json, rubrics.csv or assessed-rubrics.csv")
    start = read_text(path).lstrip()[:1]
    if start == "{":
        return _json_rubrics(path)
    if start == "[":
        return _topic_rubrics(path)
    shape = 'a CSV with header "id","rubrik" and ids {topic}-r{n} (e.g. 1-1-r3)'
    with open_text(path) as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or [h.strip().lower() for h in header[:2]] != ["id", "rubrik"]:
            raise IkatError(f"unexpected header {header}", path=path, where="line 1", fix=shape)
        out: dict[str, list[Rubric]] = {}
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            match = RUBRIC_ID.fullmatch(row[0].strip()) if len(row) >= 2 and row[1].strip() else None
            if match is None:
                raise IkatError(f"not a rubric row: {row}", path=path, where=f"line {reader.line_num}", fix=shape)
            out.setdefault(match.group(1), []).append(Rubric(row[0].strip(), match.group(1), row[1].strip()))
    if not out:
        raise IkatError("no rubrics in the file", path=path, fix=shape)
    return out


def _topic_rubrics(path: Path) -> dict[str, list[Rubric]]:
    """Rubrics of topics that have none (2023, 2024): each turn's information need (its resolved utterance, else
    its utterance), in turn order: what ``ikatkit simulate``'s replay users pursue, turn n being rubric n."""
    from ikatkit.topics import load_topics

    return {c.id: [Rubric(f"{c.id}-r{n}", c.id, str(t.resolved_utterance or t.utterance))
                   for n, t in enumerate(c.turns, start=1)] for c in load_topics(path).conversations}


def _json_rubrics(path: Path) -> dict[str, list[Rubric]]:
    shape = 'the released rubrics.json: {"1-1": ["a rubric question?", ...], ...}'
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise IkatError(f"invalid JSON: {err.msg}", path=path, where=f"line {err.lineno}, column {err.colno}",
                        fix=shape) from None
    out: dict[str, list[Rubric]] = {}
    for topic, questions in data.items():
        if not isinstance(questions, list) or not all(isinstance(q, str) and q.strip() for q in questions):
            raise IkatError(f"the rubrics of {topic} are not a list of questions", path=path,
                            where=f"key {topic!r}", fix=shape)
        out[topic] = [Rubric(f"{topic}-r{i}", topic, q.strip()) for i, q in enumerate(questions, start=1)]
    if not any(out.values()):
        raise IkatError("no rubrics in the file", path=path, fix=shape)
    return out


def topic_of(turn: str) -> str:
    """The topic of a turn id ``{topic}_{turn}`` (``1-1_3`` -> ``1-1``), also of a 2026 turn key
    ``{user}/{topic}_{turn}``."""
    return dialogue_of(turn).rpartition("/")[2]


def dialogue_of(turn: str) -> str:
    """The dialogue of a turn key: its topic, with its user where several users play one topic (``u/1-1``)."""
    return turn.rsplit("_", 1)[0]


def rubric_ids(rubrics: Mapping[str, list[Rubric]]) -> dict[str, dict[str, str]]:
    """Per topic, each rubric question (white space collapsed, case ignored) -> its 2026 id ``rub_<topic>_<n>``,
    n counting the topic's questions in the file's order from 1."""
    return {topic: {norm(r.question): f"rub_{topic}_{n}" for n, r in enumerate(items, start=1)}
            for topic, items in rubrics.items()}


def norm(text: str) -> str:
    """A rubric question as matched: white space collapsed, case ignored."""
    return " ".join(text.split()).casefold()


def parse_score(output: str) -> int | None:
    """The first digit 0-5 of a judge's output standing alone (``4``, ``Score: 4``, ``4: mostly ...``); else None."""
    match = re.search(r"(?<![\d.])([0-5])(?!\d|\.\d)", output)
    return int(match.group(1)) if match else None


class RubricJudge:
    """Scores (rubric question, answer) pairs 0-5 with an LLM of ``ikatkit.llm`` (the ``rubric_score`` prompt)."""

    def __init__(self, llm: ChatLLM | None, max_new_tokens: int = 4) -> None:
        if llm is None:
            raise IkatError("rubric measures need an LLM judge", where="RubricCoverage / RubricScore",
                            fix="pass --llm-config (e.g. backend transformers, model bundled:smollm2)")
        self.llm, self.max_new_tokens = llm, max_new_tokens
        self.label = f"LLM {llm.backend}:{llm.model}"

    def scores(self, questions: Sequence[str], answers: Sequence[str]) -> list[int]:
        from ikatkit.llm.prompts import render

        batch = [render("rubric_score", query=q, response=a) for q, a in zip(questions, answers)]
        out = []
        for answer, output in zip(answers, self.llm.chat(batch, max_new_tokens=self.max_new_tokens) if batch else []):
            value = parse_score(output)
            if value is None:
                self.llm.count_fallback("rubric score not understood: 0")
            out.append(0 if value is None or not answer.strip() else value)
        return out


def rubric_scores(responses: Mapping[str, str], rubrics: Mapping[str, list[Rubric]],
                  judge: RubricJudge) -> dict[str, dict[str, Any]]:
    """Per dialogue (topic, or user and topic) with rubrics and responses: ``scores`` (best 0-5 per rubric id over
    the dialogue's responses),
    ``coverage`` (share >= ``COVERED``) and ``score`` (mean)."""
    dialogues: dict[str, list[str]] = {}
    for turn, text in responses.items():
        dialogues.setdefault(dialogue_of(turn), []).append(text)
    pairs = [(dialogue, r, text) for dialogue, texts in dialogues.items() for r in rubrics.get(topic_of(dialogue), [])
             for text in texts]
    values = judge.scores([r.question for _, r, _ in pairs], [text for _, _, text in pairs])
    best: dict[str, dict[str, int]] = {}
    for (topic, rubric, _), value in zip(pairs, values):
        scores = best.setdefault(topic, {})
        scores[rubric.id] = max(scores.get(rubric.id, 0), value)
    return {topic: {"scores": scores, "coverage": sum(v >= COVERED for v in scores.values()) / len(scores),
                    "score": sum(scores.values()) / len(scores)} for topic, scores in best.items()}
