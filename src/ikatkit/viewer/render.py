"""Write the viewer: ``index.html`` (runs, conversations and their measures, the turns where two runs differ most)
and one page per conversation under ``c/``, rendered by Jinja2 with autoescape (every text from a run is escaped;
JSON inside ``<script>`` has ``<``, ``>`` and ``&`` as ``\\u`` escapes, so no ``</script>`` ends it early). A
ranking shows its top :data:`~ikatkit.viewer.data.TOP` passages; the rest sit in the page's JSON and are drawn on
demand. Nothing is written outside ``out``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_text
from ikatkit.turn_pages import conversation_of, page_file, page_of, turn_number, turn_url, user_of
from ikatkit.viewer.data import (MARKER, RELEVANT, TOP, Judgements, RunData, cited, grade_of, pages, passages_of,
                                 score_runs, turn_keys)

EXCERPT = 220  # characters of a passage shown before its <details> opens


def script_json(data: Any) -> str:
    """JSON safe inside ``<script>``: ``<``, ``>`` and ``&`` escaped (no ``</script>`` or ``<!--`` can close it)."""
    return (json.dumps(data, separators=(",", ":"), ensure_ascii=False)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _environment() -> Any:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("ikatkit.viewer", "templates"), autoescape=select_autoescape(["html"]),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda v, d=4: "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{d}f}"
    env.filters["signed"] = lambda v: "" if v is None else f"{v:+.4f}"
    return env


def linked_response(text: str, cites: list[str], anchor: str) -> Any:
    """A response as safe HTML: its text escaped, each citation marker a link to its passage on the page."""
    from markupsafe import Markup, escape

    out = Markup("")
    at = 0
    for match in MARKER.finditer(text):
        number = match.group(1) or match.group(2)
        pid = cites[int(number) - 1] if number and 0 < int(number) <= len(cites) else match.group(3)
        out += escape(text[at:match.start()])
        if pid:
            out += Markup('<a class=cite href="#{}">{}</a>').format(f"{anchor}-{pid}", match.group(0))
        else:
            out += escape(match.group(0))
        at = match.end()
    return out + escape(text[at:])


def write_viewer(runs: list[RunData], judgements: Judgements, out: Path) -> Path:
    """The viewer of ``runs`` in ``out``: its ``index.html``."""
    columns = score_runs(runs, judgements)  # refusals (qrels that grade no turn) before anything is written
    out.mkdir(parents=True, exist_ok=True)
    env = _environment()
    all_pages = pages(runs)
    texts = _texts(runs, judgements)
    differ: list[dict[str, Any]] = []
    summaries = []
    for i, page in enumerate(all_pages):
        keys = turn_keys(runs, page, judgements.topics)
        turns = [_turn(runs, key, judgements, texts, page) for key in keys]
        differ += [{"key": t["key"], "url": turn_url(t["key"]), "delta": t["delta"], "measure": t["delta_measure"]}
                   for t in turns if t["delta"] is not None]
        context = {"page": page, "title": _title(judgements, page), "runs": runs, "turns": turns,
                   "excerpt": EXCERPT,
                   "previous": page_file(all_pages[i - 1])[2:] if i else None,
                   "next": page_file(all_pages[i + 1])[2:] if i + 1 < len(all_pages) else None,
                   "ptkb": _ptkb(judgements, page), "farewells": [r.farewells.get(page) for r in runs],
                   "dialogue_labels": _labels(runs, judgements, page, None), "judge": judgements.judge,
                   "judged": judgements.qrels is not None, "ptkb_judged": judgements.ptkb_qrels is not None,
                   "rest": script_json({t["key"] + "|" + str(j): column["rest"] for t in turns
                                        for j, column in enumerate(t["columns"]) if column["rest"]})}
        write_text(out / page_file(page), env.get_template("conversation.html").render(**context))
        summaries.append({"page": page, "url": page_file(page), "title": context["title"],
                          "user": user_of(page), "conversation": conversation_of(page),
                          "user_type": next((c["user_type"] for t in turns for c in t["columns"] if c["user_type"]),
                                            None),
                          "turns": [sum(page_of(k) == page for k in r.turns) for r in runs],
                          "values": [[r.per_page.get(page, {}).get(c) for r in runs] for c in columns]})
    differ.sort(key=lambda d: -abs(d["delta"]))
    index = env.get_template("index.html").render(runs=runs, pages=summaries, columns=columns,
                                                  differ=differ[:25], judgements=judgements)
    write_text(out / "index.html", index)
    return out / "index.html"


def _title(judgements: Judgements, page: str) -> str:
    if judgements.topics is None:
        return ""
    try:
        return judgements.topics.conversation(conversation_of(page)).title
    except KeyError:  # a conversation the topics lack
        return ""


def _texts(runs: list[RunData], judgements: Judgements) -> dict[str, str]:
    """The texts of every passage a page shows in full: each ranking's top and the cited passages."""
    if judgements.texts is None:
        return {}
    ids = {p["id"] for r in runs for t in r.turns.values() for i, p in enumerate(passages_of(t))
           if i < TOP or p["used"]}
    return judgements.texts(sorted(ids))


def _ptkb(judgements: Judgements, page: str) -> list[tuple[str, str]]:
    if judgements.topics is None:
        return []
    try:
        return list(judgements.topics.conversation(conversation_of(page)).ptkb.items())
    except KeyError:  # a conversation the topics lack
        return []


def _ptkb_grade(qrels: Any, qid: str, key: str, index: int) -> int | None:
    """A statement's grade: by its key (2023/2024 PTKB qrels) or as ``ptkb-<conversation>-<i>`` (2025 NIST)."""
    if qrels is None:
        return None
    judged = qrels.get(qid, {})
    return judged.get(key, judged.get(f"ptkb-{qid.rpartition('_')[0]}-{index}"))


def _turn(runs: list[RunData], key: str, judgements: Judgements, texts: dict[str, str], page: str) -> dict[str, Any]:
    qid = conversation_of(key)
    topic_turn = None
    if judgements.topics is not None and not user_of(key) and not any(r.interactive for r in runs):
        try:
            topic_turn = judgements.topics.turn(qid)
        except KeyError:  # a turn the topics lack
            pass
    qrels = judgements.qrels
    columns = []
    for number, data in enumerate(runs):
        turn = data.turns.get(key)
        ranking = passages_of(turn)
        cites = cited(turn)
        anchor = f"r{number}-t{turn_number(key)}"
        row = data.judged_as.get(key, "")  # the qrels row grading this turn: its qid, or its user's rubric id
        rows = [{"rank": i + 1, **p, "grade": grade_of(qrels, row, p["id"]), "text": texts.get(p["id"], "")}
                for i, p in enumerate(ranking[:TOP])]
        shown = {r["id"] for r in rows}
        extra = [{"rank": i + 1, **p, "grade": grade_of(qrels, row, p["id"]), "text": texts.get(p["id"], "")}
                 for i, p in enumerate(ranking) if p["used"] and p["id"] not in shown]
        used = {p.key for r in (turn.responses if turn else []) for p in r.ptkb}
        used_texts = {p.text for r in (turn.responses if turn else []) for p in r.ptkb}
        ptkb = [{"key": k, "text": s, "used": k in used or s in used_texts,
                 "grade": _ptkb_grade(judgements.ptkb_qrels, qid, k, i)} for i, (k, s) in
                enumerate(_ptkb(judgements, page))]
        response = min(turn.responses, key=lambda r: r.rank) if turn and turn.responses else None
        columns.append({
            "present": turn is not None, "anchor": anchor, "user": turn.user if turn else None,
            "user_id": data.users.get(key, ""), "user_type": _user_type(key, turn, judgements),
            "response": linked_response(response.text, cites, anchor) if response else "",
            "more_responses": len(turn.responses) - 1 if turn else 0,
            "rows": rows, "cited_below": extra, "count": len(ranking), "judged": qrels is not None,
            "rest": [[i + TOP + 1, p["id"], round(p["score"], 4), grade_of(qrels, row, p["id"]), int(p["used"])]
                     for i, p in enumerate(ranking[TOP:])],
            "rubric_id": row if judgements.rubric_qrels else None,
            "ptkb": ptkb, "notes": data.notes.get(key, []), "measures": data.per_turn.get(key, {}),
            "fragments": _labels([data], judgements, page, turn_number(key))[0],
            "relevant": sum((grade_of(qrels, row, p["id"]) or 0) >= RELEVANT for p in ranking) if qrels else None})
    delta, measure, found = None, None, []
    if len(runs) >= 2:
        a, b = runs[0].per_turn.get(key, {}), runs[1].per_turn.get(key, {})
        measure = next((m for m in judgements.measures if m in a and m in b), None)
        delta = b[measure] - a[measure] if measure else None
        if qrels and qid in qrels and not judgements.rubric_qrels:
            sets = [{p["id"] for p in passages_of(r.turns.get(key))} for r in runs[:2]]
            relevant = {pid for pid, g in qrels[qid].items() if g >= RELEVANT}
            found = [sorted(relevant & sets[0] - sets[1]), sorted(relevant & sets[1] - sets[0])]
    deltas = {m: runs[1].per_turn[key][m] - runs[0].per_turn[key][m] for m in judgements.measures
              if len(runs) >= 2 and m in runs[0].per_turn.get(key, {}) and m in runs[1].per_turn.get(key, {})}
    return {"key": key, "qid": qid, "number": turn_number(key), "topic": topic_turn, "columns": columns,
            "delta": delta, "delta_measure": measure, "deltas": deltas, "found": found}


def _user_type(key: str, turn: Any, judgements: Judgements) -> str | None:
    """The type of a turn's simulated user: by the user id in ``--user-types``, else as the run notes it (2026
    ``user_meta.user_type``)."""
    from ikatkit.evaluate.user_types import type_of

    noted = {key: turn.user.user_type} if turn is not None and turn.user is not None and turn.user.user_type else {}
    return type_of(key, noted, judgements.user_types)


def _labels(runs: list[RunData], judgements: Judgements, page: str, turn: int | None) -> list[list[dict[str, Any]]]:
    """Per run, NIST's labels (and the judge's values) of the dialogue (``turn`` None) or of the rubric fragments
    that hold ``turn``."""
    from ikatkit.evaluate.assessments import DIALOG_FORM

    out = []
    conversation = conversation_of(page)
    for data in runs:
        names = {data.name, data.run.run_name}
        found = []
        for i, a in enumerate(judgements.assessments):
            if a.run not in names or a.topic != conversation:
                continue
            if (turn is None) != (a.form == DIALOG_FORM) or (turn is not None and turn not in
                                                              [t.turn for t in a.turns]):
                continue
            judge = judgements.judged[i] if i < len(judgements.judged) else {}
            found.append({"form": a.form, "turns": [t.turn for t in a.turns], "where": a.where,
                          "labels": [(q, label, a.values.get(q), judge.get(q)) for q, label in a.labels.items()]})
        out.append(found)
    return out
