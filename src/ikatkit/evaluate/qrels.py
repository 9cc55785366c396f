"""TREC qrels (``qid 0 docid grade``) with one clear error per malformed line."""

from __future__ import annotations

import logging
from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.suggest import path_fix

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
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 4 or not parts[3].lstrip("-").isdigit():
                shown = line.strip()
                shown = shown if len(shown) <= 200 else f"{shown[:200]}... ({len(shown)} characters)"
                raise IkatError(f"expected 'qid 0 docid grade', got {shown!r}", path=path,
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


def write_qrels(qrels: Qrels, path: str | Path) -> None:
    """TREC qrels lines ``qid 0 docid grade`` in the mapping's order, written atomically."""
    from ikatkit.atomic import write_text

    write_text(path, "".join(f"{qid} 0 {docid} {grade}\n" for qid, docs in qrels.items()
                             for docid, grade in docs.items()))
