"""TREC qrels (``qid 0 docid grade``) and iKAT 2026's rubric-based qrels (``rubric_id doc:passage rel``, three
columns, no Q0: ``rubric-based-qrels.txt``), with one clear error per malformed line."""

from __future__ import annotations

import logging
from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.suggest import path_fix
from ikatkit.textfile import open_text

log = logging.getLogger(__name__)

Qrels = dict[str, dict[str, int]]

MISSING = ("skip", "zero")  # judged turns a run lacks: left out (as trec_eval) or scored 0


def load_qrels(path: str | Path) -> Qrels:
    """``{qid: {docid: grade}}``; passage qrels and PTKB qrels (docid = PTKB key) alike.

    A repeated (qid, docid) with the same grade is counted and logged; with another grade it is an error
    naming both lines."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("qrels file not found", path=path,
                        fix=path_fix(path, "pass the year's qrels (e.g. 2023 qrels.txt)"))
    qrels: Qrels = {}
    lines: dict[tuple[str, str], int] = {}
    repeated = 0
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) == 3 and number == 1 and parts[2].lstrip("-").isdigit():
                raise IkatError(f"three columns: {line.strip()!r} looks like rubric-based qrels (rubric_id "
                                "doc:passage rel)", path=path, where="line 1",
                                fix="evaluate an interactive run against them with `ikatkit eval RUN --qrels FILE "
                                    "--rubrics RUBRICS` (load_rubric_qrels)")
            if len(parts) != 4 or not parts[3].lstrip("-").isdigit():
                raise IkatError(f"expected 'qid 0 docid grade', got {_shown(line)!r}", path=path,
                                where=f"line {number}", fix="qrels lines have 4 columns, the last an integer")
            qid, docid, grade = parts[0], parts[2], int(parts[3])
            first = lines.setdefault((qid, docid), number)
            if first != number:
                if qrels[qid][docid] != grade:
                    raise IkatError(f"{qid} {docid} is judged {qrels[qid][docid]} on line {first} and {grade} here",
                                    path=path, where=f"line {number}", fix="keep one judgement per (turn, passage)")
                repeated += 1
            qrels.setdefault(qid, {})[docid] = grade
    if not qrels:
        raise IkatError("qrels file is empty", path=path, fix="pass the right file")
    if repeated:
        log.warning("%s: %d repeated qrels lines (same turn, passage and grade) ignored", path, repeated)
    return qrels


def _shown(line: str) -> str:
    shown = line.strip()
    return shown if len(shown) <= 200 else f"{shown[:200]}... ({len(shown)} characters)"


def qrels_columns(path: str | Path) -> int:
    """The number of columns of the first non-empty line of a qrels file (0 when it has none or is missing)."""
    path = Path(path)
    if not path.is_file():
        return 0
    with open_text(path) as handle:
        return next((len(line.split()) for line in handle if line.strip()), 0)


def load_rubric_qrels(path: str | Path) -> Qrels:
    """``{rubric_id: {passage_id: grade}}`` from rubric-based qrels: ``rubric_id doc:passage rel`` per line (the
    2026 ``rubric-based-qrels.txt``, grades 0-4), white-space separated, no Q0 column; rubric ids look like
    ``rub_<conversation>_<n>``. A repeated pair with another grade is an error naming both lines."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("rubric qrels file not found", path=path,
                        fix="pass the rubric-based qrels (rubric_id doc:passage rel), e.g. rubric-based-qrels.txt")
    qrels: Qrels = {}
    first_line: dict[tuple[str, str], int] = {}
    shape = "rubric qrels lines have 3 columns: rubric_id doc:passage rel (an integer), e.g. rub_1-1_2 cw22-id:3 2"
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) == 4 and parts[1] in ("0", "Q0"):
                raise IkatError(f"four columns: {_shown(line)!r} looks like TREC qrels (qid 0 docid grade)", path=path,
                                where=f"line {number}", fix="pass rubric-based qrels here, or TREC qrels without "
                                                            "--rubrics")
            if len(parts) != 3 or not parts[2].lstrip("-").isdigit():
                raise IkatError(f"expected 'rubric_id doc:passage rel', got {_shown(line)!r}", path=path,
                                where=f"line {number}", fix=shape)
            rubric, docid, grade = parts[0], parts[1], int(parts[2])
            first = first_line.setdefault((rubric, docid), number)
            if first != number and qrels[rubric][docid] != grade:
                raise IkatError(f"{rubric} {docid} is judged {qrels[rubric][docid]} on line {first} and {grade} here",
                                path=path, where=f"line {number}", fix="keep one judgement per (rubric, passage)")
            qrels.setdefault(rubric, {})[docid] = grade
    if not qrels:
        raise IkatError("rubric qrels file is empty", path=path, fix="pass the right file")
    return qrels


def write_qrels(qrels: Qrels, path: str | Path) -> None:
    """TREC qrels lines ``qid 0 docid grade`` in the mapping's order, written atomically."""
    from ikatkit.atomic import write_text

    write_text(path, "".join(f"{qid} 0 {docid} {grade}\n" for qid, docs in qrels.items()
                             for docid, grade in docs.items()))
