"""What the viewer shows, gathered once from the runs and the judgements given: plain dicts the templates render.

Runs are read by :func:`ikatkit.runs.io.read_run` (every format ikatkit reads); what a format carries beyond the
run model (the simulated user's id in 2026 rows, the farewell row where the user left) comes from the same
records (:func:`ikatkit.runs.io.load_records`). Passage texts come from :mod:`ikatkit.index.texts`, measures from
:mod:`ikatkit.evaluate` (ir-measures per turn; the simulator's rubric scores per conversation), NIST's and a judge's
labels from :mod:`ikatkit.evaluate.assessments`. ikatkit's own notes are read from the run's folder: the
``manifest.json`` written beside the run file, the per-turn records of ``checkpoints/`` (``ikatkit run``) or
``turns/`` (``ikatkit interactive``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.evaluate.qrels import Qrels
from ikatkit.runs.model import Run, TurnResult, user_turn_key
from ikatkit.turn_pages import conversation_of, page_of, turn_number, user_of
from ikatkit.topics import Topics

TOP = 10  # passages of a ranking shown at once; the rest are folded into the page's JSON
MEASURES = ("nDCG@3", "nDCG@5", "P(rel=2)@20", "R(rel=2)@20")  # the viewer's default columns
RELEVANT = 2  # a passage graded this or above counts as relevant (the track's binary measures)
# citation markers in a response: [3], Doc3 (1-based, into the cited passages), or a passage id
MARKER = re.compile(r"\[(\d{1,4})\]|\bDoc(\d{1,4})\b|\[?(clueweb22-en\d{4}-\d{2}-\d{5}:\d+)\]?")


@dataclass
class Judgements:
    """Everything the pages show beside the runs; each part optional."""

    topics: Topics | None = None
    qrels: Qrels | None = None
    ptkb_qrels: Qrels | None = None
    texts: Any = None  # ids -> {id: text} (ikatkit.index.texts)
    rubrics: dict[str, list[Any]] | None = None
    assessments: list[Any] = field(default_factory=list)
    judged: list[dict[str, int | None]] = field(default_factory=list)  # a judge's values, aligned to assessments
    judge: str = ""  # the judge's label file
    user_types: dict[str, str] | None = None  # user id -> user type (`--user-types`)
    measures: list[str] = field(default_factory=lambda: list(MEASURES))
    rubric_qrels: bool = False  # ``qrels`` are rubric-based (2026): rows are rubric ids, a turn graded by its rubric


@dataclass
class RunData:
    """One run as the viewer reads it: its turns by key (:attr:`~ikatkit.runs.model.TurnResult.key`: ``qid``, or
    ``user/qid``), the user id and farewell per conversation, ikatkit's notes, and its measures per turn and per
    conversation."""

    name: str
    path: Path
    run: Run
    turns: dict[str, TurnResult]
    users: dict[str, str]
    farewells: dict[str, tuple[str, str]]  # page -> (the last turn answered, what the user said leaving)
    description: str = ""
    notes: dict[str, list[str]] = field(default_factory=dict)
    run_notes: dict[str, int] = field(default_factory=dict)
    per_turn: dict[str, dict[str, float]] = field(default_factory=dict)
    per_page: dict[str, dict[str, float]] = field(default_factory=dict)
    interactive: bool = False
    judged_as: dict[str, str] = field(default_factory=dict)  # turn key -> the qrels row grading it (qid, rubric id)
    by_type: Any = None  # the TypeTable of `eval --by user-type` (rubric qrels)


def read_run_data(name: str, path: Path, topics: Topics | None) -> RunData:
    """A run and what its records and folder say beyond the run model."""
    from ikatkit.runs.io import load_records, read_run

    run = read_run(path, topics=topics)
    fmt, records = load_records(path)
    rows = [entry for _, entry in records] if fmt in ("interactive", "2025-interactive", "2026-interactive") else []
    users: dict[str, str] = {}
    farewells: dict[str, tuple[str, str]] = {}
    keys: list[str] = []
    last: dict[str, str] = {}
    for row in rows:
        meta = row.get("metadata") or {}
        first = (row.get("responses") or [{}])[0]
        user = str(meta.get("user_id") or (first.get("user_meta") or {}).get("user_id") or "")
        qid = str(meta.get("topic_id", ""))
        key = user_turn_key(user or None, qid)
        text = first.get("assistant_text", first.get("text"))
        if text is None:  # the farewell: where the user left
            farewells[page_of(key)] = (last.get(page_of(key), ""), str(first.get("user_utterance") or ""))
            continue
        keys.append(key)
        last[page_of(key)] = key
        if user:
            users[key] = user
    turns = ({key: turn for key, turn in zip(keys, run.turns)} if rows and len(keys) == len(run.turns)
             else {t.key: t for t in run.turns})
    data = RunData(name, path, run, turns, users, farewells, run.description,
                   interactive=any(t.user is not None for t in run.turns))
    _read_folder(data)
    return data


def _read_folder(data: RunData) -> None:
    """The description and notes ikatkit wrote beside the run (:func:`ikatkit.runs.manifest.manifest_of`)."""
    from ikatkit.runs.manifest import description_of, manifest_of

    manifest = manifest_of(data.path)
    if manifest is None:
        return
    folder = data.path.parent
    data.description = data.description or description_of(manifest)
    data.run_notes = {str(k): int(v) for k, v in (manifest.get("notes") or {}).items()}
    data.run_notes.update({f"LLM output refused by the guard of {stage}": int(n)
                           for stage, n in (manifest.get("guarded_llm_outputs") or {}).items()})
    records = [r for f in sorted((folder / "checkpoints").glob("batch-*.json"))
               for r in json.loads(f.read_text(encoding="utf-8")).get("records", [])]
    records += [t["record"] for f in sorted((folder / "turns").rglob("*.json"))  # turns/<user>/<topic>_<n>.json
                if "record" in (t := json.loads(f.read_text(encoding="utf-8")))]
    for record in records:
        notes = [str(n) for n in record.get("notes") or []]
        notes += [f"{stage}: LLM output refused by its guard ({why})" for stage, why in
                  (record.get("rejected") or {}).items()]
        if notes:
            key = user_turn_key(record.get("user_id") or None, str(record.get("qid")))
            data.notes[key if key in data.turns else str(record.get("qid"))] = notes


def score_runs(runs: list[RunData], judgements: Judgements) -> list[str]:
    """Measures per turn and per page of every run; the columns the overview shows, in order. Qrels that grade no
    turn of any run are refused (:func:`_score_turns`, :func:`_score_rubrics`)."""
    columns: list[str] = []
    if judgements.qrels:
        columns += judgements.measures
        (_score_rubrics if judgements.rubric_qrels else _score_turns)(runs, judgements)
    if judgements.rubrics:
        from ikatkit.evaluate.responses.providers.simulator import sim_rubric_scores

        for data in runs:
            by_user: dict[str, dict[str, tuple[str | None, int | None]]] = {}
            for key, turn in data.turns.items():
                if turn.user is not None:
                    qid, user = conversation_of(key), user_of(key)
                    by_user.setdefault(user, {})[qid] = (turn.user.rubric, turn.user.rubric_score)
            for user, judged in by_user.items():
                if not any(score is not None for _, score in judged.values()):
                    continue
                for conversation, row in sim_rubric_scores(judged, judgements.rubrics)[0].items():
                    page = user_turn_key(user or None, conversation)
                    data.per_page.setdefault(page, {}).update(
                        {"SimRubricScore": row["score"], "SimRubricCoverage": row["coverage"]})
                columns += [c for c in ("SimRubricScore", "SimRubricCoverage") if c not in columns]
    for data in runs:
        groups: dict[str, dict[str, list[float]]] = {}
        for key, values in data.per_turn.items():
            for measure, value in values.items():
                groups.setdefault(page_of(key), {}).setdefault(measure, []).append(value)
        for page, by_measure in groups.items():
            data.per_page.setdefault(page, {}).update({m: sum(v) / len(v) for m, v in by_measure.items()})
    return columns


def _score_turns(runs: list[RunData], judgements: Judgements) -> None:
    """Offline runs against turn qrels (ir-measures, as ``ikatkit eval``); an interactive run is refused as eval
    refuses it (its turn ids count the user's utterances), and so are qrels that judge no turn of the runs."""
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.user_types import offline_qrels_error

    qrels = judgements.qrels
    assert qrels is not None
    for data in runs:
        if data.interactive:
            raise offline_qrels_error(data.name, qrels)
        data.judged_as = {key: key for key in data.turns if key in qrels}
    if not any(data.judged_as for data in runs):
        turns = sorted({k for data in runs for k in data.turns})
        raise IkatError(f"the qrels judge none of the runs' turns (qrels: e.g. {', '.join(list(qrels)[:2])}; runs: "
                        f"e.g. {', '.join(turns[:2])})", where="--qrels",
                        fix="pass the qrels of the topics the runs answer (their year and conversations)")
    for data in runs:
        ranking = {key: dict(data.turns[key].ranking()) for key in data.judged_as}
        ranking = {key: ranked for key, ranked in ranking.items() if ranked}
        if ranking:  # a closed-book run ranks nothing: its turns have no values
            data.per_turn = evaluate(ranking, qrels, judgements.measures).per_query


def _score_rubrics(runs: list[RunData], judgements: Judgements) -> None:
    """Interactive runs against rubric qrels: each turn graded and measured by the rubric its user pursued (the
    rubric's qrels; 0 where it cites nothing, as eval scores a rubric's turn), and the per-user-type table that
    ``ikatkit eval --by user-type`` prints (:func:`~ikatkit.evaluate.user_types.evaluate_rubric_run`: the last try
    stands for a rubric, means over the rubrics reached), per type when every user's type is known. An offline run
    is refused, and so are qrels that judge no rubric a run's users pursued."""
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.responses.rubrics import rubric_ids
    from ikatkit.evaluate.user_types import evaluate_rubric_run, rubric_of, type_of

    qrels, rubrics = judgements.qrels, judgements.rubrics
    assert qrels is not None and rubrics is not None
    ids = rubric_ids(rubrics)
    for data in runs:
        if not data.interactive:
            raise IkatError(f"run {data.name} is not interactive: rubric qrels grade the turns a simulated user "
                            "spent on each rubric", where="--qrels",
                            fix="pass an interactive run (a simulation dump or a released interactive run), or the "
                                "offline qrels for an offline run")
        noted = {k: t.user.user_type for k, t in data.turns.items() if t.user is not None and t.user.user_type}
        typed = all(type_of(key, noted, judgements.user_types) for key in data.turns)
        data.by_type = evaluate_rubric_run(data.run, qrels, rubrics, judgements.measures,
                                           user_types=judgements.user_types, by_type=typed)
        data.judged_as = {key: rid for key, turn in data.turns.items()
                          if (rid := rubric_of(turn, ids)) is not None and rid in qrels}
        ranking = {key: dict(data.turns[key].ranking()) for key in data.judged_as}
        scored = {key: ranked for key, ranked in ranking.items() if ranked}
        per_query = evaluate(scored, {key: qrels[data.judged_as[key]] for key in scored}, judgements.measures,
                             fit=False).per_query if scored else {}
        data.per_turn = {key: {m: per_query.get(key, {}).get(m, 0.0) for m in judgements.measures}
                         for key in data.judged_as}


def pages(runs: list[RunData]) -> list[str]:
    """Every page (conversation, or conversation and user) any run has, in natural order."""
    from ikatkit.evaluate.plots import natural_key

    return sorted({page_of(k) for r in runs for k in r.turns} | {p for r in runs for p in r.farewells},
                  key=lambda page: (natural_key(conversation_of(page)), user_of(page)))


def turn_keys(runs: list[RunData], page: str, topics: Topics | None) -> list[str]:
    """The turns of a page: those of the runs and, for offline runs, the topics' turns of that conversation."""
    keys = {k for r in runs for k in r.turns if page_of(k) == page}
    if topics is not None and not user_of(page) and not any(r.interactive for r in runs):
        try:
            keys |= {t.qid for t in topics.conversation(page).turns}
        except KeyError:  # a conversation the topics lack
            pass
    return sorted(keys, key=turn_number)


def grade_of(qrels: Qrels | None, qid: str, pid: str) -> int | None:
    return None if qrels is None else qrels.get(qid, {}).get(pid)


def passages_of(turn: TurnResult | None) -> list[dict[str, Any]]:
    """A turn's ranking (first occurrence wins) with whether its responses cite each passage."""
    if turn is None:
        return []
    used = {p.id for r in turn.responses for p in r.passages if p.used}
    return [{"id": pid, "score": score, "used": pid in used} for pid, score in turn.ranking()]


def cited(turn: TurnResult | None) -> list[str]:
    """The passages the first response cites, in its order (markers [1], Doc1 ... point into this list)."""
    if turn is None or not turn.responses:
        return []
    first = min(turn.responses, key=lambda r: r.rank)
    return [p.id for p in first.passages if p.used]
