"""NIST's assessments of the iKAT 2025 interactive runs, read as the organizers released them.

- The assessors' forms (``guidelines/ikat-dialog-v1.json``, ``ikat-fragment-v1.json``): questions with an ``id``,
  a ``widget`` (``choice`` with ``options``, or ``text``). Options are listed best first; ikatkit's ordinal value of
  an option is ``len(options) - position`` (5 = the best of five, 1 = the worst; 3..1 for the confidence). The
  released ``ikat-dialog-v1.json`` has a trailing comma (after the personalization question's ``help``): the
  reader accepts trailing commas before ``}`` or ``]`` and nothing else beyond JSON.
- The assessment files (``interactive/assessements/NIST/topic<conversation>.final``): a JSON array of entries
  ``{"runtag", "type": <form label>, "topic", "responses": [{"turn", "response": {"user_utterance", "user_rubrik",
  "user_rubrik_score", "text", "citations", "ptkb_provenance"}}], "judgment": {question id: option label or text}}``:
  per run one dialogue entry (``ikat-dialog-v1``, the whole conversation) and fragment entries
  (``ikat-fragment-v1``, the turns of one rubric). Labels match the form's options ignoring case and spacing
  (the files write ``Highly meets`` where the form has ``Highly meets`` and ``Fully Meets``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.textfile import read_text

DIALOG_FORM = "ikat-dialog-v1"
FRAGMENT_FORM = "ikat-fragment-v1"
CONFIDENCE = "rater-confidence"


def loads_lenient(text: str, path: str | Path) -> Any:
    """JSON with trailing commas before ``}`` / ``]`` allowed (outside strings); other errors name the line."""
    out: list[str] = []
    in_string, escaped, comma = False, False, -1  # comma: where in ``out`` the last comma outside strings is
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == ",":
            comma = len(out)
        elif char in "}]":
            if comma >= 0:
                out[comma] = ""  # a trailing comma
            comma = -1
        elif not char.isspace():
            in_string, comma = char == '"', -1
        out.append(char)
    try:
        return json.loads("".join(out))
    except json.JSONDecodeError as err:
        raise IkatError(f"not JSON: {err.msg}", path=path, where=f"line {err.lineno}",
                        fix="pass the file as the organizers released it") from None


def _key(label: str) -> str:
    return " ".join(label.casefold().split())


@dataclass(frozen=True)
class Question:
    """One question of a form: ``options`` best first (empty for a text question)."""

    id: str
    text: str
    options: tuple[str, ...] = ()

    def value(self, label: str) -> int | None:
        """The ordinal value of an option label (``len(options)`` for the first, 1 for the last), None if none."""
        keys = [_key(o) for o in self.options]
        return len(keys) - keys.index(_key(label)) if _key(label) in keys else None


@dataclass(frozen=True)
class Form:
    label: str
    title: str
    questions: tuple[Question, ...]

    def question(self, qid: str) -> Question:
        return next(q for q in self.questions if q.id == qid)

    @property
    def scales(self) -> tuple[Question, ...]:
        """The choice questions but the assessor's confidence: the dimensions a judge rates."""
        return tuple(q for q in self.questions if q.options and q.id != CONFIDENCE)


def read_form(path: str | Path) -> Form:
    """One assessor form (see the module's docstring)."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("form file not found", path=path, fix="pass the release's guidelines/ikat-*-v1.json")
    data = loads_lenient(read_text(path), path)
    try:
        questions = tuple(Question(str(q["id"]), str(q["question"]),
                                   tuple(str(o) for o in q.get("options") or ()) if q.get("widget") == "choice" else ())
                          for q in data["questions"])
        return Form(str(data["label"]), str(data.get("title", "")), questions)
    except (KeyError, TypeError) as err:
        raise IkatError(f"field {err} missing or malformed", path=path,
                        fix="a form is {label, title, questions: [{id, question, widget, options}]}") from None


def read_forms(paths: Iterable[str | Path]) -> dict[str, Form]:
    """Forms by label, from files or folders (every ``*.json`` in a folder)."""
    files = [f for p in map(Path, paths) for f in (sorted(p.glob("*.json")) if p.is_dir() else [p])]
    forms = {form.label: form for form in map(read_form, files)}
    if not forms:
        raise IkatError("no form found", path=", ".join(map(str, paths)), fix="pass the release's guidelines folder")
    return forms


@dataclass(frozen=True)
class Turn:
    """One turn of an assessed dialogue: what the simulated user said and pursued, and the system's answer
    (None for the user's farewell)."""

    turn: int
    user: str
    rubric: str | None
    rubric_score: float | None
    text: str | None
    ptkb: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assessment:
    """One entry of an assessment file: a run's dialogue (or fragment) of a conversation and its judgment, as
    option labels (``labels``) and their ordinal values (``values``, choice questions only)."""

    run: str
    topic: str
    form: str
    turns: tuple[Turn, ...]
    labels: dict[str, str]
    values: dict[str, int] = field(default_factory=dict)
    where: str = ""
    user: str | None = None  # 2026: the simulated user (type) an entry names (``user_type``, else ``user_id``)

    @property
    def key(self) -> tuple[str, str, str, tuple[int, ...]]:
        """What identifies the assessed unit: run, topic, form and turns."""
        return self.run, self.topic, self.form, tuple(t.turn for t in self.turns)


def _entries(text: str, path: Path) -> list[tuple[int, Any]]:
    """The elements of a top-level JSON array with the line each starts on."""
    decoder, i = json.JSONDecoder(), 0
    out: list[tuple[int, Any]] = []
    i = len(text) - len(text.lstrip())
    if not text.startswith("[", i):
        raise IkatError("not a JSON array of assessment entries", path=path, where="line 1",
                        fix="pass a topic*.final file as released")
    i += 1
    while True:
        while i < len(text) and (text[i].isspace() or text[i] == ","):
            i += 1
        if i >= len(text) or text[i] == "]":
            return out
        line = text.count("\n", 0, i) + 1
        try:
            entry, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as err:
            raise IkatError(f"not JSON: {err.msg}", path=path, where=f"line {err.lineno}",
                            fix="pass the file as the organizers released it") from None
        out.append((line, entry))


def _turn(item: Any) -> Turn:
    response = item["response"]
    return Turn(int(item["turn"]), str(response.get("user_utterance") or ""), response.get("user_rubrik"),
                response.get("user_rubrik_score"), response.get("text"),
                tuple(str(s) for s in response.get("ptkb_provenance") or ()))


def read_assessment_file(path: str | Path, forms: dict[str, Form]) -> list[Assessment]:
    """The entries of one ``topic*.final`` file; an entry of an unknown form, a missing field or a label that is
    no option of its question is an IkatError naming the file, the entry's line and the field."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("assessment file not found", path=path, fix="pass interactive/assessements/NIST/topic*.final")
    out = []
    for line, entry in _entries(read_text(path), path):
        where = f"line {line}"
        try:
            form = forms.get(entry["type"])
            if form is None:
                raise IkatError(f"entry of form {entry['type']!r}, not one of {sorted(forms)}", path=path, where=where,
                                fix="pass the form of that label (--forms)")
            turns = tuple(_turn(item) for item in entry["responses"])
            labels = {str(k): str(v) for k, v in entry["judgment"].items()}
            run, topic = str(entry["runtag"]), str(entry["topic"])
        except (KeyError, TypeError, ValueError) as err:
            raise IkatError(f"field {err} missing or malformed", path=path, where=where,
                            fix="entries are {runtag, type, topic, responses: [{turn, response}], judgment}") from None
        values = {}
        for question in form.questions:
            if question.options and question.id in labels:
                value = question.value(labels[question.id])
                if value is None:
                    raise IkatError(f"judgment {question.id} = {labels[question.id]!r} is no option of form "
                                    f"{form.label}", path=path, where=f"{where}, field judgment.{question.id}",
                                    fix=f"use one of {list(question.options)}")
                values[question.id] = value
        user = entry.get("user_type") or entry.get("user_id")
        out.append(Assessment(run, topic, form.label, turns, labels, values, f"{path.name}:{line}",
                              str(user) if user else None))
    return out


def read_assessments(paths: Sequence[str | Path], forms: dict[str, Form]) -> list[Assessment]:
    """The entries of assessment files or folders (every ``topic*.final`` in a folder), in file order."""
    files = [f for p in map(Path, paths) for f in (sorted(p.glob("topic*.final")) if p.is_dir() else [p])]
    if not files:
        raise IkatError("no assessment file found", path=", ".join(map(str, paths)),
                        fix="pass topic*.final files or their folder")
    return [a for f in files for a in read_assessment_file(f, forms)]


def type_means(assessments: Sequence[Assessment], forms: dict[str, Form],
               user_types: dict[str, str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Per run and user type (2026: entries naming their user; ``user_types`` maps user ids to types): the
    dialogues assessed, the run's conversations assessed, their share (coverage) and each dimension's mean over the
    type's units. An entry without a user is an IkatError naming it and the fix."""
    kinds: dict[int, str] = {}
    for i, a in enumerate(assessments):
        kind = (user_types or {}).get(a.user or "", a.user)
        if kind is None:
            raise IkatError(f"assessment {a.where} (run {a.run}, topic {a.topic}) names no user",
                            where="--by user-type",
                            fix="2025 assessments have one user per topic: leave out --by; 2026 entries name theirs "
                                "(user_type or user_id, with --user-types FILE mapping ids to types)")
        kinds[i] = kind
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for run in dict.fromkeys(a.run for a in assessments):
        mine = [i for i, a in enumerate(assessments) if a.run == run]
        conversations = {assessments[i].topic for i in mine if assessments[i].form == DIALOG_FORM}
        for kind in sorted({kinds[i] for i in mine}):
            units = [assessments[i] for i in mine if kinds[i] == kind]
            played = {a.topic for a in units if a.form == DIALOG_FORM}
            row: dict[str, Any] = {"dialogues": len(played), "conversations": len(conversations),
                                   "coverage": len(played) / len(conversations) if conversations else 0.0}
            row["mean"] = run_means(units, forms).get(run, {})
            out.setdefault(run, {})[kind] = row
    return out


def run_means(assessments: Sequence[Assessment], forms: dict[str, Form]) -> dict[str, dict[str, float]]:
    """Per run, the mean ordinal value of every rated dimension over its assessed units (dialogues, fragments)."""
    sums: dict[str, dict[str, list[int]]] = {}
    for a in assessments:
        for q in forms[a.form].scales:
            if q.id in a.values:
                sums.setdefault(a.run, {}).setdefault(q.id, []).append(a.values[q.id])
    return {run: {q: sum(v) / len(v) for q, v in dims.items()} for run, dims in sums.items()}
