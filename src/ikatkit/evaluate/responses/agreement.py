"""Agreement of a nugget matcher with people: the human matching labels of the iKAT 2024 "Conversational Gold" study.

A label line is ``{hit}_{conversation}_{turn}_{nugget}_{team-run}<TAB>{0|1}``: whether people could infer gold nugget
``[nugget]`` of turn ``{conversation}_{turn}`` (the passage-span nuggets of ``gold_nuggets_human.json``) from the
response of the run named by the team-run tag (``ksu-1``). The tags are not the run ids of the response files:
:func:`map_tags` maps each to a run, by name where exactly one run with the tag's responses carries the team's name,
else by fit (the run whose responses best explain the tag's labels: ROC AUC of the lexical content-word score).

:func:`agreement` compares a matcher's labels with the human ones (scikit-learn's accuracy, balanced accuracy,
precision / recall of "supported", Cohen's kappa with a bootstrap 95% interval; per run the human nugget recall
over the labelled pairs against the matcher's, Kendall's tau over runs). :func:`cross_validate` picks a
matcher's threshold leaving one conversation out: the labels of a conversation never both tune and report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.textfile import read_text
from ikatkit.evaluate.responses.data import Nugget, ResponseRun
from ikatkit.evaluate.responses.nuggets import LexicalMatcher

LINE = re.compile(r"(\d+)_(\d+)_(\d+)_(\d+)_([a-z]+-\d+)\t([01])")
SHAPE = "{hit}_{conversation}_{turn}_{nugget}_{team-run}<TAB>{0|1}, e.g. 14_1_7_1_iires-1<TAB>0"
BOOTSTRAP = 1000


@dataclass(frozen=True)
class Label:
    """One human judgement: can nugget ``nugget`` of ``turn`` be inferred from the response of run ``tag``?"""

    hit: str
    turn: str  # {conversation}_{turn}
    nugget: str  # "[i]", as keyed in the nugget file
    tag: str
    human: int
    line: int

    @property
    def conversation(self) -> str:
        return self.turn.split("_", 1)[0]


@dataclass
class TagRun:
    """The run a team-run tag names: ``how`` it was found (given | name | fit), its fit and the runner-up's."""

    tag: str
    run: str
    how: str
    fit: float | None = None
    runner_up: tuple[str, float] | None = None
    candidates: int = 1


def read_labels(path: str | Path) -> list[Label]:
    """The labels of a file; a line of another shape is an IkatError naming the line (blank lines are skipped)."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("label file not found", path=path, fix="pass the human matching labels (a text file)")
    labels = []
    for number, text in enumerate(read_text(path).splitlines(), 1):
        if not text.strip():
            continue
        match = LINE.fullmatch(text.strip("\r\n "))
        if match is None:
            raise IkatError(f"not a label line: {text[:60]!r}", path=path, where=f"line {number}", fix=SHAPE)
        hit, conversation, turn, nugget, tag, human = match.groups()
        labels.append(Label(hit, f"{conversation}_{turn}", f"[{nugget}]", tag, int(human), number))
    if not labels:
        raise IkatError("no labels in the file", path=path, fix=SHAPE)
    return labels


def check_nuggets(labels: Sequence[Label], nuggets: dict[str, list[Nugget]], path: str | Path) -> None:
    """Every label's turn and nugget index exist in the nugget file, else an IkatError naming the label line."""
    ids = {turn: {n.id for n in group} for turn, group in nuggets.items()}
    for label in labels:
        if label.nugget not in ids.get(label.turn, set()):
            missing = "turn" if label.turn not in ids else f"nugget {label.nugget} of turn"
            raise IkatError(f"{missing} {label.turn} is not in the nugget file", path=path,
                            where=f"line {label.line}",
                            fix="pass the passage-span nugget file the labels number (gold_nuggets_human.json)")


def _pairs(labels: Sequence[Label], runs: dict[str, ResponseRun], tag_runs: dict[str, str],
           nuggets: dict[str, list[Nugget]]) -> tuple[list[str], list[list[Nugget]], list[list[int]]]:
    """(responses, nugget groups, label indices per group): one group per (run, turn) of the labels."""
    by_id = {turn: {n.id: n for n in group} for turn, group in nuggets.items()}
    groups: dict[tuple[str, str], list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault((tag_runs[label.tag], label.turn), []).append(i)
    keys = list(groups)
    return ([runs[run].responses.get(turn, "") for run, turn in keys],
            [[by_id[turn][labels[i].nugget] for i in groups[(run, turn)]] for run, turn in keys],
            [groups[key] for key in keys])


def pair_scores(matcher: Any, labels: Sequence[Label], runs: dict[str, ResponseRun], tag_runs: dict[str, str],
                nuggets: dict[str, list[Nugget]]) -> np.ndarray:
    """The matcher's value of each label's pair: ``scores`` (similarity, share ...) where the matcher has them,
    else its ``support`` (0, 0.5, 1)."""
    responses, groups, indices = _pairs(labels, runs, tag_runs, nuggets)
    values = matcher.scores(responses, groups) if hasattr(matcher, "scores") else matcher.support(responses, groups)
    out = np.zeros(len(labels))
    for index, value in zip(indices, values):
        out[index] = np.asarray(value, dtype=float)
    return out


def map_tags(labels: Sequence[Label], runs: dict[str, ResponseRun], nuggets: dict[str, list[Nugget]],
             path: str | Path, given: dict[str, str] | None = None) -> dict[str, TagRun]:
    """The run of each tag: ``given`` (TAG=RUN), else the only run named for the team (``ksu`` in ``ksu``) with
    responses to all the tag's turns, else the best fit among the named runs (or among all runs when none is
    named): the highest ROC AUC of the lexical score against the tag's labels. A tag no run can explain (no run
    with its turns) is an IkatError naming its first label line."""
    from sklearn.metrics import roc_auc_score

    given = given or {}
    lexical = LexicalMatcher()
    out: dict[str, TagRun] = {}
    for tag in dict.fromkeys(label.tag for label in labels):
        mine = [label for label in labels if label.tag == tag]
        turns = {label.turn for label in mine}
        if tag in given:
            if given[tag] not in runs:
                raise IkatError(f"tag {tag} is mapped to run {given[tag]!r}, which no response file holds",
                                where="--tag", fix=f"use one of {', '.join(sorted(runs))}")
            out[tag] = TagRun(tag, given[tag], "given")
            continue
        answered = [name for name, run in runs.items() if all(run.responses.get(t, "").strip() for t in turns)]
        team = tag.rsplit("-", 1)[0]
        named = [name for name in answered if team in name.lower()]
        candidates = named or answered
        if not candidates:
            unanswered = [x for x in mine if not any(r.responses.get(x.turn, "").strip() for r in runs.values())]
            raise IkatError(f"tag {tag} maps to no run: no run answers all of its turns {sorted(turns)}",
                            path=path, where=f"line {(unanswered or mine)[0].line}",
                            fix="pass the response files of that run (--responses), or --tag TAG=RUN")
        if len(named) == 1:
            out[tag] = TagRun(tag, named[0], "name")
            continue
        human = [label.human for label in mine]
        fits = []
        for name in candidates:
            values = pair_scores(lexical, mine, runs, {tag: name}, nuggets)
            fits.append((float(roc_auc_score(human, values)) if len(set(human)) == 2 else 0.5, name))
        fits.sort(key=lambda x: (-x[0], x[1]))
        out[tag] = TagRun(tag, fits[0][1], "fit", fits[0][0], (fits[1][1], fits[1][0]) if len(fits) > 1 else None,
                          len(candidates))
    return out


def kappa(human: Sequence[int], predicted: Sequence[int]) -> float:
    """Cohen's kappa (scikit-learn); 0 when both label sets are one and the same constant (no information)."""
    from sklearn.metrics import cohen_kappa_score

    if len(set(human) | set(predicted)) < 2:
        return 0.0
    return float(cohen_kappa_score(human, predicted))


def best_threshold(scores: np.ndarray, human: np.ndarray) -> float:
    """The score threshold (``score >= t`` is supported) with the highest Cohen's kappa on these pairs; on a tie
    the lowest. Candidates: every distinct score."""
    best, best_kappa = float("inf"), -2.0
    for t in np.unique(scores):
        value = kappa(list(human), list((scores >= t).astype(int)))
        if value > best_kappa:
            best, best_kappa = float(t), value
    return best


@dataclass(frozen=True)
class Fold:
    """One leave-one-conversation-out fold: the threshold tuned on ``tuned_on``, applied to ``conversation``."""

    conversation: str
    threshold: float
    tuned_on: tuple[str, ...]
    pairs: int


def cross_validate(scores: np.ndarray, human: np.ndarray,
                   conversations: Sequence[str]) -> tuple[np.ndarray, list[Fold]]:
    """Labels predicted out of fold: each conversation's pairs get the threshold tuned on all the other
    conversations' pairs (:func:`best_threshold`). Needs two conversations or more."""
    labels = np.asarray(conversations)
    names = list(dict.fromkeys(labels.tolist()))
    if len(names) < 2:
        raise IkatError("cross-validation by conversation needs labels of two conversations or more",
                        where="--threshold cv", fix="pass a numeric --threshold")
    predicted = np.zeros(len(scores), dtype=int)
    folds = []
    for held in names:
        test = labels == held
        threshold = best_threshold(scores[~test], human[~test])
        predicted[test] = (scores[test] >= threshold).astype(int)
        folds.append(Fold(held, threshold, tuple(n for n in names if n != held), int(test.sum())))
    return predicted, folds


@dataclass
class Agreement:
    pairs: int
    accuracy: float
    balanced_accuracy: float
    precision: float
    recall: float
    kappa: float
    kappa_ci: tuple[float, float]
    run_tau: float | None
    runs: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "accuracy": self.accuracy, "balanced_accuracy": self.balanced_accuracy,
                "precision": self.precision, "recall": self.recall, "kappa": self.kappa,
                "kappa_ci": list(self.kappa_ci), "run_tau": self.run_tau, "runs": self.runs}


def agreement(human: Sequence[int] | np.ndarray, predicted: Sequence[int] | np.ndarray, runs: Sequence[str],
              bootstrap: int = BOOTSTRAP, seed: int = 0) -> Agreement:
    """The matcher's labels against the human ones (1 = supported): scikit-learn's measures, Cohen's kappa with a
    percentile bootstrap 95% interval over pairs (``bootstrap`` resamples, ``seed``), and per run the human nugget
    recall over its labelled pairs against the matcher's, with Kendall's tau (scipy) over runs."""
    from scipy.stats import kendalltau
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, precision_score, recall_score

    h, p = np.asarray(human, dtype=int), np.asarray(predicted, dtype=int)
    rng = np.random.default_rng(seed)
    draws = [kappa(list(h[i]), list(p[i])) for i in (rng.integers(0, len(h), len(h)) for _ in range(bootstrap))]
    names = list(dict.fromkeys(runs))
    by_run = {name: {"pairs": int(sum(r == name for r in runs)),
                     "human": float(h[np.asarray(runs) == name].mean()),
                     "matcher": float(p[np.asarray(runs) == name].mean())} for name in names}
    tau = None
    if len(names) > 1:
        value = kendalltau([by_run[n]["human"] for n in names], [by_run[n]["matcher"] for n in names]).statistic
        tau = None if np.isnan(value) else float(value)
    return Agreement(len(h), float(accuracy_score(h, p)), float(balanced_accuracy_score(h, p)),
                     float(precision_score(h, p, zero_division=0)), float(recall_score(h, p, zero_division=0)),
                     kappa(list(h), list(p)),
                     (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))) if draws else (0.0, 0.0),
                     tau, by_run)
