"""Inputs of response evaluation: responses of runs, reference responses, gold nuggets, grounding passages.

- Responses: any run ``ikatkit.runs.io.read_run`` reads (the rank-1 response of each turn, its used passages;
  no passage marked used -> the top 5, the organizers' rule), the participant-response JSON of the iKAT 2024
  release ``{turn_id: {run_id: response}}`` (one run per run id) and its gold-response JSON
  ``{turn_id: {"manual": {"response": str, ...}}}`` (one run, ``manual``), and an interactive run's dump of the
  2025 simulation server (``/run/dump`` JSON lines: the ``interactive`` format of :mod:`ikatkit.runs.io`) or as the
  organizers released it (``2025-interactive``), with the simulated user's recorded rubric and score per turn.
- References: the topics' canonical ``response`` per turn, or a file: ``{turn_id: text}``, the gold-response JSON,
  or a topic file.
- Nuggets: the organizers' gold-nugget JSON ``{turn_id: {"[i]": {"text": str, "relevance": "1".."4"}}}`` (2024)
  or ``{turn_id: [{"text": str, "docid": str}]}`` (2025 ``nuggets-nist.json``, ``nuggets-LLM.json``: ungraded).
- Passages: texts by id from a passages JSONL (``{"id","contents"}`` or ``{"doc_id","passage_id","passage_text"}``)
  or a Lucene index built by ``ikatkit index build``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.textfile import read_text
from ikatkit.runs.model import Run
from ikatkit.topics import Topics

TOP_WHEN_NONE_USED = 5


@dataclass
class ResponseRun:
    """One run's response per turn (the rank-1 response), the ids of the passages it marks as used and, for
    interactive runs, the simulated user's recorded ``(rubric, 0-5 score)`` of each answer (``judged``)."""

    name: str
    responses: dict[str, str]
    used: dict[str, list[str]] = field(default_factory=dict)
    judged: dict[str, tuple[str | None, int | None]] = field(default_factory=dict)
    interactive: bool = False  # the turns are a simulated user's, not the topics' (matched by conversation)
    user_types: dict[str, str] = field(default_factory=dict)  # turn key -> the user's type, where the run notes it


@dataclass(frozen=True)
class Nugget:
    id: str
    text: str
    grade: int


def response_run(run: Run, name: str | None = None) -> ResponseRun:
    """The rank-1 response of each turn (keyed by :attr:`~ikatkit.runs.model.TurnResult.key`: with the user where
    several users play one topic) and its used passages (the top 5 when none is marked used)."""
    responses: dict[str, str] = {}
    used: dict[str, list[str]] = {}
    judged: dict[str, tuple[str | None, int | None]] = {}
    types: dict[str, str] = {}
    for turn in run.turns:
        if not turn.responses:
            continue
        first = min(turn.responses, key=lambda r: r.rank)
        responses[turn.key] = first.text
        marked = [p.id for p in first.passages if p.used]
        used[turn.key] = marked or [p.id for p in first.passages[:TOP_WHEN_NONE_USED]]
        if turn.user is not None:
            judged[turn.key] = (turn.user.rubric, turn.user.rubric_score)
            if turn.user.user_type:
                types[turn.key] = turn.user.user_type
    interactive = any(t.user is not None for t in run.turns)
    return ResponseRun(name or run.run_name, responses, used, judged, interactive, types)


def _load_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise IkatError(f"{what} file not found", path=path, fix=f"pass the path of a {what} file")
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise IkatError(f"invalid JSON: {err.msg}", path=path, where=f"line {err.lineno}, column {err.colno}",
                        fix=f"a {what} file is one JSON object") from None


def _response_json_runs(data: dict[str, Any], path: Path) -> list[ResponseRun] | None:
    """Runs from ``{turn: {run_id: text}}`` or ``{turn: {"manual": {"response": text}}}``; None for other shapes."""
    if not data or not all(isinstance(v, dict) and v for v in data.values()):
        return None
    runs: dict[str, dict[str, str]] = {}
    for turn, by_run in data.items():
        for run_id, value in by_run.items():
            if isinstance(value, dict) and isinstance(value.get("response"), str):
                value = value["response"]
            if not isinstance(value, str):
                return None
            runs.setdefault(run_id, {})[turn] = value
    return [ResponseRun(name, responses) for name, responses in runs.items()]

def read_named_response_runs(items: Sequence[str], topics: Topics | None = None) -> list[ResponseRun]:
    """The runs of several files; ``NAME=PATH`` (:func:`ikatkit.runs.io.named_path`) renames a file holding one
    run. Run names must be distinct."""
    from ikatkit.runs.io import named_path

    runs: list[ResponseRun] = []
    for item in items:
        name, path = named_path(item)
        found = read_response_runs(path, topics)
        if name and len(found) == 1:
            found = [replace(found[0], name=name)]
        runs += found
    names = [r.name for r in runs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise IkatError(f"runs named {repeated} more than once", where="RUN...", fix="name them NAME=PATH")
    return runs


def read_response_runs(path: str | Path, topics: Topics | None = None) -> list[ResponseRun]:
    """The runs in a file: many for a participant-response JSON, one for any run file, gold-response JSON or
    interactive-run dump."""
    path = Path(path)
    if path.suffix == ".json" and path.is_file():
        try:
            data = json.loads(read_text(path))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and "turns" not in data:
            runs = _response_json_runs(data, path)
            if runs is not None:
                return runs
    from ikatkit.runs.io import read_run

    return [response_run(read_run(path, topics=topics))]


def read_references(path: str | Path) -> dict[str, str]:
    """Reference responses by turn from ``{turn: text}``, the gold-response JSON or a topic file."""
    path = Path(path)
    data = _load_json(path, "reference")
    if isinstance(data, list):
        from ikatkit.topics import load_topics

        return {t.qid: t.response or "" for t in load_topics(path)}
    if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
        return dict(data)
    runs = _response_json_runs(data, path) if isinstance(data, dict) else None
    if runs is not None and len(runs) == 1:
        return runs[0].responses
    raise IkatError("not a reference file", path=path,
                    fix='use {turn_id: response}, the gold-response JSON {turn_id: {"manual": {"response"}}} or topics')


def read_nuggets(path: str | Path) -> dict[str, list[Nugget]]:
    """Gold nuggets by turn; a turn with an empty nugget object is kept (with no nuggets) so it can be reported.

    Reads the organizers' nugget file, or their gold-response file, whose atomic nuggets (``matched`` and
    ``not-matched`` of each response) carry no grade: they get grade 0, so grade-based measures treat them alike
    and ``VitalRecall`` has no value."""
    path = Path(path)
    data = _load_json(path, "nugget")
    shape = ('expected {turn_id: {"[i]": {"text": str, "relevance": "1".."4"}}} or a gold-response file '
             '{turn_id: {run: {"response": str, "nuggets": {"matched": [str], "not-matched": [str]}}}}')
    if not isinstance(data, dict) or not data:
        raise IkatError("a nugget file is a non-empty JSON object keyed by turn id", path=path, fix=shape)
    first = next(iter(data.values()))
    if isinstance(first, dict) and first and all(isinstance(v, dict) and "response" in v for v in first.values()):
        return _response_nuggets(path, data, shape)
    if isinstance(first, list):
        return _listed_nuggets(path, data)
    nuggets: dict[str, list[Nugget]] = {}
    for turn, items in data.items():
        if not isinstance(items, dict):
            raise IkatError(f"the nuggets of {turn} are a {type(items).__name__}, not an object", path=path,
                            where=f"key {turn!r}", fix=shape)
        nuggets[turn] = []
        for key, item in items.items():
            where = f"key {turn!r} -> {key!r}"
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise IkatError("a nugget needs a 'text' string", path=path, where=where, fix=shape)
            try:
                relevance: Any = item.get("relevance")  # None or a non-number: the error below
                grade = int(relevance)
            except (TypeError, ValueError):
                raise IkatError(f"relevance {item.get('relevance')!r} is not a grade", path=path, where=where,
                                fix=shape) from None
            if item["text"].strip():
                nuggets[turn].append(Nugget(key, item["text"].strip(), grade))
    return nuggets


def _listed_nuggets(path: Path, data: dict) -> dict[str, list[Nugget]]:
    """The 2025 nugget files (``nuggets-nist.json``, ``nuggets-LLM.json``): ``{turn: [{"text", "docid"}]}``, no
    grade (grade 0 each, as for a gold-response file's nuggets; the ``docid``, a passage or ``ptkb-...`` statement
    it was taken from, is not needed to match it). Repeated texts of a turn count once."""
    shape = 'the 2025 nugget shape {turn_id: [{"text": str, "docid": str}]}'
    nuggets: dict[str, list[Nugget]] = {}
    for turn, items in data.items():
        if not isinstance(items, list):
            raise IkatError(f"the nuggets of {turn} are a {type(items).__name__}, not a list", path=path,
                            where=f"key {turn!r}", fix=shape)
        texts: list[str] = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise IkatError("a nugget needs a 'text' string", path=path, where=f"key {turn!r} -> [{i}]",
                                fix=shape)
            if item["text"].strip():
                texts.append(item["text"].strip())
        nuggets[turn] = [Nugget(f"[{i}]", text, 0) for i, text in enumerate(dict.fromkeys(texts))]
    return nuggets


def _response_nuggets(path: Path, data: dict, shape: str) -> dict[str, list[Nugget]]:
    """The atomic nuggets a gold-response file lists per turn (every response's, in file order, once each)."""
    nuggets: dict[str, list[Nugget]] = {}
    for turn, runs in data.items():
        texts: list[str] = []
        for run, entry in (runs.items() if isinstance(runs, dict) else ()):
            lists = entry.get("nuggets") if isinstance(entry, dict) else None
            if not isinstance(lists, dict) or not all(isinstance(lists.get(k, []), list)
                                                      for k in ("matched", "not-matched")):
                raise IkatError("a gold response needs 'nuggets': {'matched': [...], 'not-matched': [...]}",
                                path=path, where=f"key {turn!r} -> {run!r}", fix=shape)
            texts += [t.strip() for t in lists.get("matched", []) + lists.get("not-matched", [])
                      if isinstance(t, str) and t.strip()]
        nuggets[turn] = [Nugget(f"[{i}]", text, 0) for i, text in enumerate(dict.fromkeys(texts))]
    return nuggets


def load_passages(paths: Sequence[str | Path] = (), index: str | Path | None = None
                  ) -> Callable[[Sequence[str]], dict[str, str]]:
    """A ``texts(ids) -> {id: text}`` function over passages JSONL files or a Lucene index."""
    from ikatkit.index.texts import passage_texts

    return passage_texts(paths, index, "the grounding measures")
