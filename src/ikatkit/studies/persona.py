"""How well persona tracking recovers the PTKB statements a user reveals (``ikatkit persona-eval``).

Per conversation: the user's utterances U and the PTKB P (the topics'; the 2025 simulated users' personas).
- **Revealed** (the gold): a statement g of P is revealed when a sentence of some utterance of U speaks of the user
  (has a first-person singular word; questions count) and contains at least half of g's content words, at least
  two of them when g has two or more (:func:`revealed`; content words:
  :func:`ikatkit.stages.persona.content_words`, stop words and pronouns left out, plurals cut).
- **Match**: an extracted statement e matches g when the MiniLM (``bundled:minilm``) cosine of e and g is at least
  the threshold t. t is calibrated (:func:`calibrate`) as the cosine at which MiniLM best agrees (F1) with the
  revealed rule over all (utterance, statement) pairs of the calibration topics (2023 train): the similarity at
  which a user's words count as saying a statement.
- **Precision**: extracted statements that match a revealed statement of their conversation / all extracted.
  **Recall**: revealed statements matched by some extracted statement / all revealed. Both summed over
  conversations (micro).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ikatkit.capabilities import ChatLLM
from ikatkit.errors import IkatError
from ikatkit.textfile import open_text
from ikatkit.stages.persona import FIRST_PERSON, content_words, sentences, words

GRID = tuple(round(0.30 + 0.05 * i, 2) for i in range(13))  # 0.30 ... 0.90


@dataclass(frozen=True)
class PersonaCase:
    """One user: the conversation id, what they said and their PTKB."""

    id: str
    utterances: tuple[str, ...]
    statements: tuple[str, ...]


@dataclass
class PersonaScore:
    cases: int
    utterances: int
    statements: int
    revealed: int
    extracted: int
    correct: int
    found: int

    @property
    def precision(self) -> float:
        return self.correct / self.extracted if self.extracted else 0.0

    @property
    def recall(self) -> float:
        return self.found / self.revealed if self.revealed else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def revealed(statement: str, utterances: Sequence[str]) -> bool:
    """Whether a sentence of some utterance speaks of the user (a first-person singular word: I, my, me, ...;
    questions count too) and holds at least half of ``statement``'s content words, at least two when it has two
    or more."""
    own = content_words(statement)
    if not own:
        return False
    need = max(min(2, len(own)), (len(own) + 1) // 2)
    return any(FIRST_PERSON & set(words(sentence)) and len(own & content_words(sentence)) >= need
               for utterance in utterances for sentence in sentences(utterance))


def load_cases(path: str | Path) -> list[PersonaCase]:
    """Users of a topics file (any year) or of the organizers' ``simulation-data.csv`` (questions as utterances,
    the ``Simulation PTKBs`` as statements)."""
    path = Path(path)
    if path.suffix == ".csv":
        return _simulation_cases(path)
    from ikatkit.topics import load_topics

    topics = load_topics(path)
    return [PersonaCase(c.id, tuple(t.utterance for t in c.turns), tuple(c.ptkb.values()))
            for c in topics.conversations]


def _simulation_cases(path: Path) -> list[PersonaCase]:
    if not path.is_file():
        raise IkatError("simulation data not found", path=path, fix="pass ../shared/ikat/2025-simulation/"
                        "simulation-data.csv or a topics file")
    with open_text(path) as handle:
        rows = list(csv.reader(handle, delimiter=";"))
    if not rows or rows[0][:2] != ["Topic ID", "Simulation PTKBs"]:
        raise IkatError("not the organizers' simulation data (no 'Topic ID;Simulation PTKBs;...' header)",
                        path=path, where="line 1", fix="pass simulation-data.csv of the simulation API repository")
    cases = []
    for row in rows[1:]:
        if len(row) < 3 or not row[0].strip():
            continue
        statements = tuple(s.strip() for s in row[1].split(";") if s.strip())
        questions = tuple(q.strip() for q in row[2:11] if q.strip())
        cases.append(PersonaCase(row[0].strip(), questions, statements))
    return cases


def _cosines(encode: Callable[[list[str]], np.ndarray], left: Sequence[str], right: Sequence[str]) -> np.ndarray:
    if not left or not right:
        return np.zeros((len(left), len(right)))
    return encode(list(left)) @ encode(list(right)).T


def calibrate(cases: Sequence[PersonaCase], encode: Callable[[list[str]], np.ndarray],
              grid: Sequence[float] = GRID) -> tuple[float, dict[float, float]]:
    """The threshold of ``grid`` at which ``cosine(u, g) >= t`` best agrees (F1) with ``revealed(g, [u])`` over
    every (utterance, statement) pair of ``cases``; and the F1 of each threshold. Ties: the lowest threshold."""
    labels, scores = [], []
    for case in cases:
        cos = _cosines(encode, case.utterances, case.statements)
        for i, utterance in enumerate(case.utterances):
            for j, statement in enumerate(case.statements):
                labels.append(revealed(statement, [utterance]))
                scores.append(cos[i, j])
    gold, cos = np.array(labels), np.array(scores)
    f1 = {}
    for t in grid:
        said = cos >= t
        tp = int((said & gold).sum())
        f1[t] = 2 * tp / (said.sum() + gold.sum()) if said.sum() + gold.sum() else 0.0
    best = max(grid, key=lambda t: (f1[t], -t))
    return best, f1


def evaluate(cases: Sequence[PersonaCase], extract: Callable[[list[str]], dict[str, list[str]]],
             encode: Callable[[list[str]], np.ndarray], threshold: float) -> PersonaScore:
    """Precision and recall of ``extract`` (utterances -> {utterance: statements}) over ``cases``."""
    said = extract(list(dict.fromkeys(u for case in cases for u in case.utterances)))
    score = PersonaScore(len(cases), 0, 0, 0, 0, 0, 0)
    for case in cases:
        gold = [g for g in case.statements if revealed(g, case.utterances)]
        found = list(dict.fromkeys(s for u in case.utterances for s in said.get(u, [])))
        cos = _cosines(encode, found, gold)
        score.utterances += len(case.utterances)
        score.statements += len(case.statements)
        score.revealed += len(gold)
        score.extracted += len(found)
        if cos.size:
            score.correct += int((cos.max(axis=1) >= threshold).sum())
            score.found += int((cos.max(axis=0) >= threshold).sum())
    return score


def rule_extract(utterances: list[str]) -> dict[str, list[str]]:
    from ikatkit.stages.persona import self_statements

    return {u: self_statements(u) for u in utterances}


def llm_extract(llm: ChatLLM) -> Callable[[list[str]], dict[str, list[str]]]:
    """The LLM extractor as the stage runs it: refused outputs fall back to the rule."""
    from ikatkit.stages.persona import llm_statements, self_statements

    def extract(utterances: list[str]) -> dict[str, list[str]]:
        extracted, _ = llm_statements(llm, utterances)
        return {u: extracted[u] if u in extracted else self_statements(u) for u in utterances}

    return extract


def table(rows: Sequence[tuple[str, str, PersonaScore]], threshold: float) -> str:
    """A Markdown table of scores, one row per (topics, extractor)."""
    lines = [f"matching: MiniLM cosine >= {threshold}", "",
             "| topics | extractor | users | utterances | PTKB | revealed | extracted | correct | found | P | R | F1 |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for topics, extractor, s in rows:
        lines.append(f"| {topics} | {extractor} | {s.cases} | {s.utterances} | {s.statements} | {s.revealed} | "
                     f"{s.extracted} | {s.correct} | {s.found} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} |")
    return "\n".join(lines) + "\n"
