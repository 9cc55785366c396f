"""Interactive runs scored per rubric and reported per user type (iKAT 2026).

In 2026 a topic is played by several simulated users of different behaviour (user types u1-u4) and passages are
judged per rubric: ``rubric-based-qrels.txt`` has ``rub_<conversation>_<n>`` ids, n counting the conversation's
rubric questions in the rubrics file's order. A user's turn pursues one rubric (``user_rubrik``); the unit of
evaluation is a (user, rubric) pair the user reached, i.e. pursued on at least one answered turn.

- **Which turn stands for a rubric** pursued over several turns (the user rephrases up to three times):
  ``last`` (default: the answer the user ended on, the one it accepted when it moved on above 3), ``best`` (the
  answer it scored highest, the earliest among equals; unscored turns count as -1) or ``first`` (the first try).
- **Means** over the reached units by default (``unreached="skip"``), so that types that played different
  conversations compare on what each reached; ``unreached="zero"`` averages over every judged rubric with 0 for the
  unreached ones: the organizers' 2026 totals, where the type that played every conversation looks best through
  coverage alone (what one team found in its 2026 results: ``../shared/ikat/2026/README.md``).
- **Coverage**: units a type reached / units judged (the qrels' rubric ids for rankings; the rubrics file's
  questions for the simulator's judgements). Under ``skip`` the units judged are the rubrics of the conversations
  each of the type's users played (its sessions in the run): a type that finishes all of its own conversations
  covers 1.0. Under ``zero`` they are every judged rubric per user, as the organizers count them; the table's
  ``unplayed_rubrics`` says how many of them belong to conversations the type's users never played.

A turn's user type is the simulator's note (``user_meta.user_type`` in ``ikatkit simulate``'s dump) or comes from a
user id -> type map (``--user-types FILE``, e.g. ``simulate --user-map``'s).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.textfile import read_text
from ikatkit.evaluate.qrels import Qrels
from ikatkit.evaluate.responses.providers.simulator import sim_units, unit_mean
from ikatkit.evaluate.responses.rubrics import Rubric, dialogue_of, norm, rubric_ids
from ikatkit.runs.model import Run, TurnResult, split_turn_key
from ikatkit.topics import split_query_id

RUBRIC_TURNS = ("last", "best", "first")
ALL = "all"  # the row of every user together


@dataclass
class TypeRow:
    """One user type's figures: units reached, units judged (rubrics x users), means per measure."""

    reached: int
    rubrics: int
    mean: dict[str, float | None] = field(default_factory=dict)

    @property
    def coverage(self) -> float:
        return self.reached / self.rubrics if self.rubrics else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"reached": self.reached, "rubrics": self.rubrics, "coverage": self.coverage, "mean": self.mean}


@dataclass
class TypeTable:
    """Figures per user type (and :data:`ALL`), how they were computed and what could not be matched."""

    rows: dict[str, TypeRow]
    measures: list[str]
    unreached: str
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"unreached": self.unreached, "by_user_type": {k: r.to_json() for k, r in self.rows.items()},
                "info": self.info}

    def to_tsv(self) -> str:
        """``user_type  reached  rubrics  coverage  measure...`` with a header; n/a where a type has no value."""
        head = "\t".join(["user_type", "reached", "rubrics", "coverage", *self.measures])
        lines = [head]
        for name, row in self.rows.items():
            values = ["n/a" if row.mean.get(m) is None else f"{row.mean[m]:.4f}" for m in self.measures]
            lines.append("\t".join([name, str(row.reached), str(row.rubrics), f"{row.coverage:.4f}", *values]))
        return "\n".join(lines) + "\n"


def read_user_types(path: str | Path) -> dict[str, str]:
    """A user id -> user type map: a JSON object (``ikatkit simulate --user-map`` writes one)."""
    path = Path(path)
    shape = 'a JSON object {user_id: user_type}, e.g. {"f3333f5c-...": "u1"} (simulate --user-map writes one)'
    if not path.is_file():
        raise IkatError("user type map not found", path=path, fix=f"pass {shape}")
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise IkatError(f"invalid JSON: {err.msg}", path=path, where=f"line {err.lineno}",
                        fix=f"write {shape}") from None
    if not isinstance(data, dict) or not data or not all(isinstance(v, str) and v for v in data.values()):
        raise IkatError("not a user id -> type map", path=path, fix=f"write {shape}")
    return {str(k): v for k, v in data.items()}


def type_of(key: str, noted: Mapping[str, str], user_types: Mapping[str, str] | None) -> str | None:
    """The user type of a turn key: from the map by the key's user id, else the run's own note."""
    user = split_turn_key(key)[0]
    if user_types is not None and user is not None and user in user_types:
        return user_types[user]
    return noted.get(key)


def require_types(keys: Sequence[str], noted: Mapping[str, str], user_types: Mapping[str, str] | None,
                  run_name: str) -> dict[str, str]:
    """Each turn key's user type; one error naming a turn without one and the fix."""
    out: dict[str, str] = {}
    for key in keys:
        kind = type_of(key, noted, user_types)
        if kind is None:
            user = split_turn_key(key)[0]
            raise IkatError(f"turn {key} of run {run_name} has no user type" + (
                f" (user {user} is not in the map)" if user and user_types is not None else
                "" if user else " (its rows name no user: a 2025 run has one user per topic)"),
                where="--by user-type",
                fix="pass --user-types FILE (user id -> type, as `ikatkit simulate --user-map` writes it), or a dump "
                    "of `ikatkit simulate --user-types`, which notes each user's type")
        out[key] = kind
    return out


def rubric_of(turn: TurnResult, ids: Mapping[str, Mapping[str, str]]) -> str | None:
    """The 2026 rubric id (``rub_<conversation>_<n>``) a turn's user pursued, None when it names none or one the
    rubrics file lacks."""
    if turn.user is None or not turn.user.rubric:
        return None
    try:
        topic = split_query_id(turn.turn_id)[0]
    except IkatError:
        return None
    return ids.get(topic, {}).get(norm(turn.user.rubric))


def pursued(run: Run, rubrics: Mapping[str, list[Rubric]]) -> tuple[dict[tuple[str | None, str], list[TurnResult]],
                                                                    list[str]]:
    """The answered turns of each (user, rubric id) in run order, and the turns whose recorded rubric matches no
    question of their conversation (``key: rubric``)."""
    ids = rubric_ids(rubrics)
    units: dict[tuple[str | None, str], list[TurnResult]] = {}
    unmatched: list[str] = []
    for turn in run.turns:
        if turn.user is None or not turn.user.rubric:
            continue
        rid = rubric_of(turn, ids)
        if rid is None:
            unmatched.append(f"{turn.key}: {turn.user.rubric[:60]}")
            continue
        units.setdefault((turn.user_id, rid), []).append(turn)
    return units, unmatched


def standing(turns: list[TurnResult], choose: str) -> TurnResult:
    """The turn whose answer stands for a rubric pursued over ``turns``: ``last``, ``best`` or ``first``."""
    if choose not in RUBRIC_TURNS:
        raise IkatError(f"unknown rubric turn {choose!r}", where="--rubric-turn", fix=f"use one of {RUBRIC_TURNS}")
    if choose == "first":
        return turns[0]
    if choose == "last":
        return turns[-1]
    scores = [t.user.rubric_score if t.user and t.user.rubric_score is not None else -1 for t in turns]
    return turns[scores.index(max(scores))]


def _rows(values: Mapping[tuple[str | None, str], dict[str, float]], kinds: Mapping[str | None, str],
          users: Mapping[str, set[str | None]], judged: Mapping[str, int], played: Mapping[str | None, set[str]],
          measures: Sequence[str], unreached: str) -> tuple[dict[str, TypeRow], dict[str, int]]:
    """Per type (and :data:`ALL`): units reached, units judged and means over the reached units (``skip``) or over
    the judged ones with 0 for the others (``zero``); and per row, the units of conversations its users never
    played. Units judged: under ``skip`` the judged rubrics of the conversations each user played (``judged``:
    conversation -> judged rubrics; ``played``: user -> its conversations), under ``zero`` every judged rubric per
    user (the organizers' 2026 totals)."""
    groups: dict[str, list[tuple[str | None, str]]] = {ALL: list(values)}
    for unit in values:
        if unit[0] in kinds:
            groups.setdefault(kinds[unit[0]], []).append(unit)
    every = sum(judged.values())
    rows: dict[str, TypeRow] = {}
    unplayed: dict[str, int] = {}
    for name in [ALL, *sorted(users)]:
        members = users[name] if name in users else set(played) | {u for u, _ in values} or {None}
        own = sum(judged.get(c, 0) for user in members for c in played.get(user, ()))
        units = groups.get(name, [])
        row = TypeRow(len(units), every * len(members) if unreached == "zero" else own)
        for m in measures:
            row.mean[m] = unit_mean([values[u][m] for u in units if m in values[u]], row.rubrics, unreached)
        rows[name], unplayed[name] = row, every * len(members) - own
    return rows, unplayed


def conversation_of_rubric(rid: str) -> str:
    """The conversation of a 2026 rubric id (``rub_9-1_3`` -> ``9-1``)."""
    return rid.removeprefix("rub_").rsplit("_", 1)[0]


def _played(keys: Sequence[str]) -> dict[str | None, set[str]]:
    """user id -> the conversations it played (has a turn in), from turn keys ``[user/]<conversation>_<n>``."""
    played: dict[str | None, set[str]] = {}
    for key in keys:
        user, turn = split_turn_key(key)
        played.setdefault(user, set()).add(turn.rsplit("_", 1)[0])
    return played


def _users_by_type(run: Run, user_types: Mapping[str, str] | None, by_type: bool) -> dict[str | None, str]:
    """user id -> type for the run's users (empty unless ``by_type``); an error for a user without a type."""
    if not by_type:
        return {}
    noted = {t.key: t.user.user_type for t in run.turns if t.user is not None and t.user.user_type}
    keys = [t.key for t in run.turns if t.user is not None]
    kinds = require_types(keys, noted, user_types, run.run_name)
    return {split_turn_key(k)[0]: v for k, v in kinds.items()}


def evaluate_rubric_run(run: Run, qrels: Qrels, rubrics: Mapping[str, list[Rubric]],
                        measures: Sequence[str] | None = None, *, user_types: Mapping[str, str] | None = None,
                        by_type: bool = True, choose: str = "last", unreached: str = "skip") -> TypeTable:
    """An interactive run's rankings scored per (user, rubric) against rubric qrels (ir-measures, as ``ikatkit
    eval``), the standing turn's citations (``choose``) being the rubric's ranking; reported for all users and,
    with ``by_type``, per user type. A reached rubric the qrels judge whose standing turn cites nothing scores 0."""
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.measures import TRACK_MEASURES

    names = list(dict.fromkeys(measures or TRACK_MEASURES))
    units, unmatched = pursued(run, rubrics)
    judged_units = {u: turns for u, turns in units.items() if u[1] in qrels}
    if not judged_units:
        shown = ", ".join(sorted({rid for _, rid in units})[:3]) or "none"
        raise IkatError(f"no rubric the run's users pursued is judged in the rubric qrels (pursued: {shown}; qrels: "
                        f"e.g. {', '.join(list(qrels)[:2])})",
                        fix="pass the rubrics file the qrels were made for (rub_<conversation>_<n>: n by its order)")
    kinds = _users_by_type(run, user_types, by_type)
    values: dict[tuple[str | None, str], dict[str, float]] = {}
    for user in dict.fromkeys(u for u, _ in judged_units):
        rankings = {rid: dict(standing(turns, choose).ranking()) for (u, rid), turns in judged_units.items()
                    if u == user}
        scored = {rid: r for rid, r in rankings.items() if r}
        per_query = evaluate(scored, qrels, names, fit=False).per_query if scored else {}  # one user's rubrics
        for rid in rankings:
            values[(user, rid)] = {m: per_query.get(rid, {}).get(m, 0.0) for m in names}
    users: dict[str, set[str | None]] = {}
    for user, kind in kinds.items():
        users.setdefault(kind, set()).add(user)
    judged: dict[str, int] = {}
    for rid in qrels:
        judged[conversation_of_rubric(rid)] = judged.get(conversation_of_rubric(rid), 0) + 1
    rows, unplayed = _rows(values, kinds, users, judged, _played([t.key for t in run.turns]), names, unreached)
    return TypeTable(rows, names, unreached, {"rubric_turn": choose, "judged_rubrics": len(qrels),
                                              "unplayed_rubrics": unplayed, "unmatched_rubrics": len(unmatched),
                                              "unmatched_examples": unmatched[:3]})


def sim_table(judged: Mapping[str, tuple[str | None, int | None]], types: Mapping[str, str],
              rubrics: Mapping[str, list[Rubric]], measures: Sequence[str], threshold: int = 3,
              unreached: str = "skip", topics: Sequence[str] | None = None) -> TypeTable:
    """The simulator's judgements per (user, rubric) (:func:`~ikatkit.evaluate.responses.providers.simulator.
    sim_units`, as the Sim measures per dialogue), reported per type: a unit is reached when one of the user's
    turns pursues the rubric (judged or not); ``SimRubricScore``, ``SimRubricCoverage`` (n/a where no turn was
    judged) and ``SimTurnsToCover`` (covered units only, never zero-filled). Rubrics judged: those of ``topics``
    (default every topic of the rubrics file). ``judged``: turn key -> (rubric, score); ``types``: turn key ->
    type (every turn of the run)."""
    units = sim_units(judged, rubrics, threshold)
    user_of = {dialogue_of(key): split_turn_key(key)[0] for key in judged}
    values: dict[tuple[str | None, str], dict[str, float]] = {(user_of[d], rid): {} for d, rid in units.reached}
    for (dialogue, rid), measured in units.values.items():
        values[(user_of[dialogue], rid)] = measured
    kinds = {split_turn_key(key)[0]: kind for key, kind in types.items()}
    per_conversation = {c: len(items) for c, items in rubrics.items() if topics is None or c in topics}
    users: dict[str, set[str | None]] = {}
    for user, kind in kinds.items():
        users.setdefault(kind, set()).add(user)
    names = [m for m in measures if m in ("SimRubricScore", "SimRubricCoverage", "SimTurnsToCover")]
    rows, unplayed = _rows(values, kinds, users, per_conversation, _played(list(types)),
                           [m for m in names if m != "SimTurnsToCover"], unreached)
    if "SimTurnsToCover" in names:  # a mean over covered units whatever --unreached says
        for name, row in rows.items():
            column = [v["SimTurnsToCover"] for u, v in values.items() if "SimTurnsToCover" in v
                      and (name == ALL or kinds.get(u[0]) == name)]
            row.mean["SimTurnsToCover"] = sum(column) / len(column) if column else None
    return TypeTable(rows, names, unreached, {"sim_threshold": threshold,
                                              "judged_rubrics": sum(per_conversation.values()),
                                              "unplayed_rubrics": unplayed})


def offline_qrels_error(run_name: str, qrels: Qrels) -> IkatError:
    """The refusal of an interactive run against qrels keyed by the topics' offline turns."""
    example = next(iter(qrels))
    return IkatError(f"run {run_name} is interactive: its turn ids ({{conversation}}_{{n}}) count the simulated "
                     f"user's utterances, not the topics' turns, so qrels keyed by the offline turns (e.g. "
                     f"{example!r}) do not apply to them (a turn '1-1_3' of the run is not the topics' turn 1-1_3)",
                     fix="pass rubric-based qrels (rubric_id doc:passage rel, 2026's rubric-based-qrels.txt) with "
                         "--rubrics RUBRICS (each turn scored for the rubric its user pursued), or evaluate an "
                         "offline run against these qrels")
