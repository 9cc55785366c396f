"""Read and write runs: the official 2023/2024 JSON and 2025 JSON Lines, TREC runs, ``{qid: {pid: score}}`` dicts.

Each official format is a view of :class:`~ikatkit.runs.model.Run` shaped by its submission template
(:mod:`ikatkit.runs.templates`): the template decides which fields a year carries and in what order.

- 2023: PTKB provenance as ``{"id", "text", "score"}``; 2024: as PTKB keys (ints) plus ``eval_response``.
- 2025: one line per turn; ``references`` = the turn's passages in rank order (first occurrence wins,
  at most 1000), ``citations`` = a response's ``used`` passages, ``ptkb_provenance`` = statement texts.
  Reading puts the references on the first response (``used`` = cited by it) and the citations of
  later responses on those; a citation's score in the first response is its reference score.
- TREC: ``qid Q0 pid rank score run_name``, from :meth:`Run.trec_ranking`.
- 2025-interactive: the interactive runs as the organizers released them, one JSON object per user utterance
  (``metadata``: ``run_id``, ``type`` = interactive, ``description``, ``track_persona``, ``topic_id`` =
  ``{topic}_{n}``; ``responses[0]``: ``user_utterance``, ``user_rubrik`` and ``user_rubrik_score`` (what the
  organizers' simulated user pursued and its 0-5 judgement of the answer), ``text``, ``citations``,
  ``ptkb_provenance``; ``references``). The farewell row (``text`` null) is not a turn and is not written.
- 2026-interactive: the same rows with ``metadata.user_id`` (several simulated users play one topic: a turn is keyed
  by user, topic and turn, :attr:`~ikatkit.runs.model.TurnResult.key`) and at most 10 citations a turn; read as
  such whenever a row names its user.
- interactive (read only): the simulation API's run dump (2026: ``metadata.user_id`` on every row, the user's type
  in ``user_meta.user_type`` where ``ikatkit simulate`` notes it), one JSON object per answered user utterance
  (``metadata.topic_id`` = ``{topic}_{n}``, ``responses[0]`` = the utterance, ``assistant_text``,
  ``assistant_citations`` in rank order, ``assistant_meta``: ``ptkb_provenance`` and ``used_passages`` where
  ikatkit wrote it); a session's farewell (no
  ``assistant_text``) is not a turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ikatkit.atomic import atomic_open
from ikatkit import jsonl
from ikatkit.errors import IkatError
from ikatkit.suggest import path_fix
from ikatkit.textfile import read_text
from ikatkit.runs.manifest import run_files
from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult, UserTurn
from ikatkit.runs.templates import TEMPLATE_FILES, Template, load_template
from ikatkit.topics import Topics

log = logging.getLogger(__name__)

FORMATS = (*TEMPLATE_FILES, "trec")
READ_FORMATS = (*FORMATS, "dict", "interactive")
Record = tuple[str, Any]  # (where it is: "line 3" or "", parsed JSON)


# ---------------------------------------------------------------- reading

def read_run(path: str | Path, fmt: str | None = None, *, topics: Topics | None = None) -> Run:
    """Read a run in any supported format (detected unless ``fmt`` is given).

    With ``topics``, PTKB references are completed from the conversations' PTKBs (keys from 2025
    statement texts, texts from 2024 keys).
    """
    path = Path(path)
    fmt, records = load_records(path, fmt)
    if fmt in TEMPLATE_FILES:
        template = load_template(fmt)
        for where, record in records:
            for issue in template.check(record):
                if issue.kind in ("type", "missing-required") or (
                        issue.kind == "unknown" and template.rule("unknown_fields") == "error"):
                    raise IkatError(issue.message, path=path, where=_place(where, issue.where),
                                    fix=f"see the official {fmt} format in {template.path}")
    return from_records(records, fmt, path, topics)


def load_records(path: str | Path, fmt: str | None = None) -> tuple[str, list[Record]]:
    """The format of ``path`` and its parsed records, without checking their structure."""
    path = Path(path)
    if fmt is not None and fmt not in READ_FORMATS:
        raise IkatError(f"unknown run format {fmt!r}", fix=f"use one of {READ_FORMATS}")
    if path.is_dir() and run_files(path):
        found = run_files(path)
        raise IkatError("a run folder, not a run file", path=path,
                        fix=f"pass its run file, {found[0]}" + (f" (or its TREC run, {found[1]})" if found[1:] else ""))
    if not path.is_file():
        raise IkatError("run file not found", path=path, fix=path_fix(path, "pass the path of a run file"))
    text = read_text(path)
    if not text.strip():
        raise IkatError("the run file is empty", path=path, fix="write the run again")
    if fmt == "trec" or (fmt is None and text.lstrip()[0] not in "{["):
        return "trec", _trec_records(text, path)
    if fmt == "2025" or (fmt is None and _first_json_line_is_turn(text)):
        return "2025", _jsonl_records(text, path)
    released = _first_json_line_is_dump(text) if fmt is None else None
    if fmt in ("2025-interactive", "2026-interactive") or released in ("2025-interactive", "2026-interactive"):
        return fmt or str(released), _jsonl_records(text, path)
    if fmt == "interactive" or (fmt is None and _first_json_line_is_dump(text)):
        return "interactive", _jsonl_records(text, path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        if truncated(err):
            raise IkatError("invalid JSON: the file looks truncated, it ends inside the value opened on line "
                            f"{err.lineno}",
                            path=path, where=f"line {err.lineno}, column {err.colno}",
                            fix="write or copy the run again in full (an interrupted write or copy cuts files short)"
                            ) from None
        raise IkatError(f"invalid JSON: {err.msg}", path=path, where=f"line {err.lineno}, column {err.colno}",
                        fix="official 2023/2024 runs are one JSON object; 2025 runs one JSON object per line") from None
    detected = _detect_json(data, path)
    if fmt is not None and fmt != detected and {fmt, detected} != {"2023", "2024"}:
        raise IkatError(f"the file looks like a {detected} run, not {fmt}", path=path,
                        fix=f"pass --format {detected}, or leave the format out to detect it")
    return fmt or detected, [("", data)]


def truncated(err: json.JSONDecodeError) -> bool:
    """Whether the JSON text ran out before its value was complete: a string never closed, or the error at the end."""
    return err.msg.startswith("Unterminated string") or not err.doc[err.pos:].strip()


def _first_json_line_is_turn(text: str) -> bool:
    first = text.lstrip().split("\n", 1)[0]
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(obj, dict) and "turn_id" in obj and "turns" not in obj


def _first_json_line_is_dump(text: str) -> str | None:
    """``2025-interactive`` (``2026-interactive`` where the row names its user) for a released interactive run,
    ``interactive`` for a server dump, else None."""
    first = text.lstrip().split("\n", 1)[0]
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:
        return None
    if not (isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) and "responses" in obj):
        return None
    responses = obj["responses"] if isinstance(obj["responses"], list) else []
    released = obj["metadata"].get("type") == "interactive" and any(
        isinstance(r, dict) and "text" in r and "assistant_text" not in r for r in responses)
    if not released:
        return "interactive"
    return "2026-interactive" if "user_id" in obj["metadata"] else "2025-interactive"


def interactive_edition(records: list[Record]) -> int:
    """2026 when the rows of an interactive run (dump or released) name their simulated user, else 2025."""
    return 2026 if any(isinstance(r, dict) and isinstance(r.get("metadata"), dict) and "user_id" in r["metadata"]
                       for _, r in records) else 2025


def _detect_json(data: Any, path: Path) -> str:
    if isinstance(data, dict) and "turns" in data:
        responses = [r for t in data["turns"] if isinstance(t, dict) for r in t.get("responses") or []
                     if isinstance(r, dict)]
        ptkb = [p for r in responses for p in r.get("ptkb_provenance") or []]
        return "2024" if "eval_response" in data or any(not isinstance(p, dict) for p in ptkb) else "2023"
    if isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
        return "dict"
    raise IkatError("not a run: expected an official run object with 'turns', or {qid: {passage_id: score}}",
                    path=path, fix="pass a 2023/2024 JSON run, a 2025 JSONL run, a TREC run or a qid->pid->score dict")


def _jsonl_records(text: str, path: Path) -> list[Record]:
    records = []
    for number, record in jsonl.records(text.splitlines()):
        if isinstance(record, jsonl.Invalid):
            cause = record.__cause__
            last = not "".join(text.splitlines()[number:]).strip()
            if last and isinstance(cause, json.JSONDecodeError) and truncated(cause):
                raise IkatError(f"invalid JSON: the file looks truncated, its last line ({number}) stops inside "
                                "an object",
                                path=path, where=f"line {number}",
                                fix="write or copy the run again in full (an interrupted write or copy cuts files "
                                    "short)")
            raise IkatError(jsonl.problem(record), path=path, where=f"line {number}",
                            fix="a 2025 run has one complete JSON object per line")
        records.append((f"line {number}", record))
    return records


def _trec_records(text: str, path: Path) -> list[Record]:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 6:
            raise IkatError(f"expected 6 columns, found {len(cols)}", path=path, where=f"line {number}",
                            fix="TREC run lines are 'qid Q0 passage_id rank score run_name'")
        try:
            records.append((f"line {number}", (cols[0], cols[2], int(cols[3]), float(cols[4]), cols[5])))
        except ValueError:
            raise IkatError(f"rank {cols[3]!r} or score {cols[4]!r} is not a number", path=path,
                            where=f"line {number}", fix="column 4 is an integer rank, column 5 a score") from None
    return records


def from_records(records: list[Record], fmt: str, path: str | Path | None = None,
                 topics: Topics | None = None) -> Run:
    """The run model of parsed records of format ``fmt`` (missing fields read as empty)."""
    if fmt == "trec":
        return _run_from_trec(records)
    if fmt == "dict":
        return _run_from_dict(records[0][1], path)
    if fmt == "2025":
        return _run_from_jsonl(records, topics)
    if fmt == "interactive":
        return _run_from_dump(records, topics)
    if fmt in ("2025-interactive", "2026-interactive"):
        return _run_from_released(records, topics)
    return _run_from_json(records[0][1], int(fmt), topics)


def _run_from_json(data: dict[str, Any], year: int, topics: Topics | None) -> Run:
    by_key = load_template(year).rule("ptkb_by") == "key"  # 2024: PTKB provenance as the statements' keys
    run = Run(str(data.get("run_name", "")), str(data.get("run_type", "")), year=year,
              eval_response=bool(data.get("eval_response", True)))
    for turn in data.get("turns") or []:
        qid = str(turn.get("turn_id", ""))
        responses = []
        for r in turn.get("responses") or []:
            passages = [PassageRef(str(p.get("id", "")), float(p.get("score", 0.0)), str(p.get("text", "")),
                                   bool(p.get("used", False))) for p in r.get("passage_provenance") or []]
            if by_key:
                ptkb = [PtkbRef(str(k), 0.0, _ptkb_text(topics, qid, str(k))) for k in r.get("ptkb_provenance") or []]
            else:
                ptkb = [PtkbRef(str(p.get("id", "")), float(p.get("score", 0.0)), str(p.get("text", "")))
                        for p in r.get("ptkb_provenance") or []]
            responses.append(Response(int(r.get("rank", 0)), str(r.get("text", "")), passages, ptkb))
        run.turns.append(TurnResult(qid, responses))
    return run


def _run_from_jsonl(records: list[Record], topics: Topics | None) -> Run:
    meta = records[0][1].get("metadata") or {} if records else {}
    run = Run(str(meta.get("run_id", "")), str(meta.get("run_type", "")), year=2025,
              team_id=str(meta.get("team_id", "")))
    for _, entry in records:
        qid = str(entry.get("turn_id", ""))
        references = entry.get("references") or {}
        responses = []
        for i, r in enumerate(entry.get("responses") or []):
            citations = r.get("citations") or {}
            if i == 0:
                passages = [PassageRef(pid, float(s), used=pid in citations) for pid, s in references.items()]
                passages += [PassageRef(pid, float(s), used=True) for pid, s in citations.items()
                             if pid not in references]
            else:
                passages = [PassageRef(pid, float(s), used=True) for pid, s in citations.items()]
            ptkb = [PtkbRef(_ptkb_key(topics, qid, str(s)), 0.0, str(s)) for s in r.get("ptkb_provenance") or []]
            responses.append(Response(int(r.get("rank", i + 1)), str(r.get("text", "")), passages, ptkb))
        run.turns.append(TurnResult(qid, responses))
    return run


def _run_from_dump(records: list[Record], topics: Topics | None) -> Run:
    meta = records[0][1].get("metadata") or {} if records else {}
    persona = (meta.get("extra") or {}).get("track_persona") if isinstance(meta.get("extra"), dict) else None
    run = Run(str(meta.get("run_id", "")), "automatic", year=2025, team_id=str(meta.get("team_id", "")),
              description=str(meta.get("description") or ""),
              track_persona=int(persona) if isinstance(persona, (int, bool)) else None)
    run.year = interactive_edition(records)
    judged = _dump_judgements(records)
    for number, (_, entry) in enumerate(records):
        qid = str((entry.get("metadata") or {}).get("topic_id", ""))
        user_id = _user_id(entry)
        for r in (entry.get("responses") or [])[:1]:
            if r.get("assistant_text") is None:  # the user's farewell: nothing was answered
                continue
            citations = r.get("assistant_citations") or {}
            meta = r.get("assistant_meta") or {}
            used = set(meta.get("used_passages") or citations)  # ikatkit names them; else every citation counts
            passages = [PassageRef(str(pid), float(s), used=pid in used) for pid, s in citations.items()]
            statements = meta.get("ptkb_provenance") or []
            ptkb = [PtkbRef(_ptkb_key(topics, qid, str(s)), 0.0, str(s)) for s in statements]
            run.turns.append(TurnResult(qid, [Response(int(r.get("rank", 1)), str(r["assistant_text"]), passages,
                                                       ptkb)], judged[number], user_id))
    return run


def _dump_judgements(records: list[Record]) -> list[UserTurn]:
    """Per dump row, the simulated user's side: its utterance, the rubric it pursued (``user_meta.rubric``, as
    ikatkit's simulator notes it) and its 0-5 judgement of the answer, which comes with the user's next utterance
    in that conversation (the next row's ``user_meta.rubric_score``)."""
    rows = [(entry.get("responses") or [{}])[0] if isinstance(entry, dict) else {} for _, entry in records]
    rows = [row if isinstance(row, dict) else {} for row in rows]
    sessions = [(_user_id(entry), str((entry.get("metadata") or {}).get("topic_id", "")).rsplit("_", 1)[0])
                for _, entry in records]
    out = []
    for i, row in enumerate(rows):
        user_meta = row.get("user_meta") or {}
        after = next((rows[j].get("user_meta") or {} for j in range(i + 1, len(rows)) if sessions[j] == sessions[i]),
                     {})
        out.append(_user_turn({"user_utterance": row.get("user_utterance"),
                                "user_rubrik": row.get("user_rubrik", user_meta.get("rubric")),
                                "user_rubrik_score": row.get("user_rubrik_score", after.get("rubric_score")),
                                "user_type": user_meta.get("user_type")}))
    return out


def _user_id(entry: Any) -> str | None:
    """The simulated user of an interactive row (``metadata.user_id``, 2026), else None."""
    meta = entry.get("metadata") if isinstance(entry, dict) else None
    user = meta.get("user_id") if isinstance(meta, dict) else None
    return str(user) if user else None


def _run_from_released(records: list[Record], topics: Topics | None) -> Run:
    meta = records[0][1].get("metadata") or {} if records else {}
    persona = meta.get("track_persona")
    run = Run(str(meta.get("run_id", "")), str(meta.get("type", "interactive")), year=interactive_edition(records),
              team_id=str(meta.get("team_id", "")), description=str(meta.get("description") or ""),
              track_persona=int(persona) if isinstance(persona, (int, bool)) else None)
    for _, entry in records:
        qid = str((entry.get("metadata") or {}).get("topic_id", ""))
        for r in (entry.get("responses") or [])[:1]:
            if r.get("text") is None:  # the user's farewell: nothing was answered
                continue
            citations = r.get("citations") or {}
            references = entry.get("references") or {}
            passages = [PassageRef(str(pid), float(s), used=pid in citations) for pid, s in references.items()]
            passages += [PassageRef(str(pid), float(s), used=True) for pid, s in citations.items()
                         if pid not in references]
            ptkb = [PtkbRef(_ptkb_key(topics, qid, str(s)), 0.0, str(s)) for s in r.get("ptkb_provenance") or []]
            run.turns.append(TurnResult(qid, [Response(int(r.get("rank") or 1), str(r["text"]), passages, ptkb)],
                                        _user_turn(r), _user_id(entry)))
    return run


def _user_turn(response: dict[str, Any]) -> UserTurn:
    """The simulated user's side of an interactive row: its utterance, rubric and 0-5 score (when recorded)."""
    score = response.get("user_rubrik_score")
    rubric = response.get("user_rubrik")
    kind = response.get("user_type")
    return UserTurn(str(response.get("user_utterance") or ""), str(rubric) if rubric else None,
                    int(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
                    str(kind) if kind else None)


def _run_from_trec(records: list[Record]) -> Run:
    rows: dict[str, list[tuple[int, str, float]]] = {}
    for _, (qid, pid, rank, score, _name) in records:
        rows.setdefault(qid, []).append((rank, pid, score))
    turns = []
    for qid, ranked in rows.items():
        ranked.sort(key=lambda row: row[0])
        turns.append(TurnResult(qid, [Response(1, "", [PassageRef(pid, score) for _, pid, score in ranked])]))
    return Run(records[0][1][4], turns=turns)


def _run_from_dict(data: dict[str, Any], path: str | Path | None) -> Run:
    turns = []
    for qid, scores in data.items():
        bad = [pid for pid, s in scores.items() if isinstance(s, bool) or not isinstance(s, (int, float))]
        if bad:
            raise IkatError(f"score of {bad[0]!r} is not a number", path=path, where=f"query {qid}",
                            fix="a run dict maps qid -> {passage_id: score}")
        ranked = sorted(scores.items(), key=lambda item: -item[1])
        turns.append(TurnResult(qid, [Response(1, "", [PassageRef(pid, float(s)) for pid, s in ranked])]))
    return Run(Path(path).stem if path else "run", turns=turns)


def _ptkb_text(topics: Topics | None, qid: str, key: str) -> str:
    try:
        return topics.conversation_of(qid).ptkb.get(key, "") if topics else ""
    except KeyError:
        return ""


def _ptkb_key(topics: Topics | None, qid: str, text: str) -> str:
    try:
        return topics.conversation_of(qid).ptkb_key(text) if topics else ""
    except KeyError:
        return ""


# ---------------------------------------------------------------- writing

def named_path(item: str) -> tuple[str | None, str]:
    """``NAME=PATH`` (a run named on the command line) as ``(NAME, PATH)``; a plain path, or an existing file whose
    name holds ``=``, as ``(None, PATH)``. The one parser of ``NAME=PATH`` arguments."""
    if "=" not in item or Path(item).exists():
        return None, item
    name, path = item.split("=", 1)
    return name, path


def write_run(run: Run, path: str | Path, fmt: str, *, topics: Topics | None = None) -> None:
    """Write ``run`` atomically in ``fmt`` (2023, 2024, 2025, 2025-interactive or trec).

    ``topics`` completes PTKB references that lack what the format needs (a text for 2023/2025, a key for 2024).
    """
    if fmt not in FORMATS:
        raise IkatError(f"unknown run format {fmt!r}", fix=f"use one of {FORMATS}")
    with atomic_open(path) as handle:
        if fmt == "trec":
            handle.writelines(trec_lines(run))
        elif load_template(fmt).jsonl:
            jsonl.write(handle, to_records(run, fmt, topics))
        else:
            json.dump(to_records(run, fmt, topics)[0], handle, ensure_ascii=False)
            handle.write("\n")


def trec_lines(run: Run) -> Iterable[str]:
    """The TREC run lines of ``run``: its :meth:`Run.trec_ranking`, ranks from 1."""
    if not run.run_name or any(c.isspace() for c in run.run_name):
        raise IkatError(f"run name {run.run_name!r} cannot be a TREC run tag", fix="give the run a name without spaces")
    for qid, ranking in run.trec_ranking().items():
        for rank, (pid, score) in enumerate(ranking.items(), start=1):
            yield f"{qid} Q0 {pid} {rank} {score!r} {run.run_name}\n"


def to_records(run: Run, fmt: str, topics: Topics | None = None) -> list[dict[str, Any]]:
    """The official records of ``run``: one object for 2023/2024, one per turn for 2025 and 2025-interactive."""
    template = load_template(fmt)
    if template.has("metadata.topic_id"):
        return _released_view(run, template, topics)
    return _jsonl_view(run, template, topics) if template.jsonl else [_json_view(run, template, topics)]


def _json_view(run: Run, t: Template, topics: Topics | None) -> dict[str, Any]:
    item_kind = t.kind("turns[].responses[].ptkb_provenance[]")
    turns = []
    for turn in run.turns:
        responses = []
        for r in turn.responses:
            passages = [t.ordered("turns[].responses[].passage_provenance[]",
                                  {"id": p.id, "text": p.text, "score": p.score, "used": p.used}) for p in r.passages]
            if item_kind == "int":
                ptkb: list[Any] = [_int_key(p, topics, turn.turn_id) for p in r.ptkb]
            else:
                ptkb = [t.ordered("turns[].responses[].ptkb_provenance[]",
                                  {"id": _key(p, topics, turn.turn_id), "text": _text(p, topics, turn.turn_id),
                                   "score": p.score}) for p in r.ptkb]
            responses.append(t.ordered("turns[].responses[]", {
                "rank": r.rank, "text": r.text, "ptkb_provenance": ptkb, "passage_provenance": passages}))
        turns.append(t.ordered("turns[]", {"turn_id": turn.turn_id, "responses": responses}))
    return t.ordered("", {"run_name": run.run_name, "run_type": run.run_type,
                          "eval_response": run.eval_response, "turns": turns})


def _jsonl_view(run: Run, t: Template, topics: Topics | None) -> list[dict[str, Any]]:
    meta = t.ordered("metadata", {"team_id": run.team_id, "run_id": run.run_name, "run_type": run.run_type})
    records, trimmed = [], 0
    most = t.limit("max_items", "references")
    for turn in run.turns:
        ranking = turn.ranking()
        trimmed += len(ranking) > most
        responses = [t.ordered("responses[]", {
            "rank": r.rank, "text": r.text,
            "citations": {p.id: p.score for p in r.passages if p.used},
            "ptkb_provenance": [_text(p, topics, turn.turn_id) for p in r.ptkb]}) for r in turn.responses]
        records.append(t.ordered("", {"metadata": meta, "turn_id": turn.turn_id, "responses": responses,
                                      "references": dict(ranking[:most])}))
    if trimmed:
        log.warning("%d turns had more than %d passages; their references keep the first %d", trimmed, most, most)
    return records


def _released_view(run: Run, t: Template, topics: Topics | None) -> list[dict[str, Any]]:
    """One row per answered turn as the organizers released interactive runs (no farewell rows); the 2026 shape
    names each row's simulated user (``metadata.user_id``) and keeps the first 10 citations."""
    most_refs, most_cited = t.limit("max_items", "references"), t.limit("max_items", "responses[].citations")
    records, trimmed, cut = [], 0, 0
    for turn in run.turns:
        ranking = turn.ranking()
        trimmed += len(ranking) > most_refs
        references = dict(ranking[:most_refs])
        first = min(turn.responses, key=lambda r: r.rank) if turn.responses else None
        cited = [(p.id, p.score) for p in first.passages if p.used and p.id in references] if first else []
        cut += len(cited) > most_cited
        user = turn.user or UserTurn()
        meta = t.ordered("metadata", {"team_id": run.team_id, "run_id": run.run_name, "type": "interactive",
                                      "description": run.description, "track_persona": run.track_persona or 0,
                                      "user_id": turn.user_id or "", "topic_id": turn.turn_id})
        response = t.ordered("responses[]", {
            "rank": 1, "user_utterance": user.utterance, "user_rubrik": user.rubric,
            "user_rubrik_score": user.rubric_score, "text": first.text if first else "",
            "citations": dict(cited[:most_cited]),
            "ptkb_provenance": [_text(p, topics, turn.turn_id) for p in first.ptkb] if first else []})
        records.append(t.ordered("", {"metadata": meta, "responses": [response], "references": references}))
    if trimmed:
        log.warning("%d turns had more than %d passages; their references keep the first %d",
                    trimmed, most_refs, most_refs)
    if cut:
        log.warning("%d turns cited more than %d passages (%s); their citations keep the first %d", cut, most_cited,
                    t.name, most_cited)
    return records


def _key(p: PtkbRef, topics: Topics | None, qid: str) -> str:
    key = p.key or (_ptkb_key(topics, qid, p.text) if p.text else "")
    if not key:
        raise IkatError(f"a PTKB reference of turn {qid} has no key", where=f"turn {qid}",
                        fix="pass the topics (--topics) so statement texts can be mapped to PTKB keys")
    return key


def _int_key(p: PtkbRef, topics: Topics | None, qid: str) -> int:
    key = _key(p, topics, qid)
    if not key.isdigit():
        raise IkatError(f"PTKB key {key!r} of turn {qid} is not an integer", where=f"turn {qid}",
                        fix="2024 runs cite PTKB statements by their integer keys in the topics")
    return int(key)


def _text(p: PtkbRef, topics: Topics | None, qid: str) -> str:
    text = p.text or (_ptkb_text(topics, qid, p.key) if p.key else "")
    if not text:
        raise IkatError(f"PTKB reference {p.key!r} of turn {qid} has no statement text", where=f"turn {qid}",
                        fix="pass the topics (--topics) so PTKB keys can be mapped to statement texts")
    return text


def _place(record_where: str, field_where: str) -> str:
    return f"{record_where}: {field_where}" if record_where else field_where
