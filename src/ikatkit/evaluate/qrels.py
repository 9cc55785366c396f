"""TREC qrels (``qid 0 docid grade``) with one clear error per malformed line."""

from __future__ import annotations

from pathlib import Path

from ikatkit.errors import IkatError

Qrels = dict[str, dict[str, int]]


def load_qrels(path: str | Path) -> Qrels:
    """``{qid: {docid: grade}}``; passage qrels and PTKB qrels (docid = PTKB key) alike."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("qrels file not found", path=path, fix="pass the year's qrels (e.g. 2023 qrels.txt)")
    qrels: Qrels = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 4 or not parts[3].lstrip("-").isdigit():
                raise IkatError(f"expected 'qid 0 docid grade', got {line.strip()!r}", path=path,
                                where=f"line {number}", fix="qrels lines have 4 columns, the last an integer")
            qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    if not qrels:
        raise IkatError("qrels file is empty", path=path, fix="pass the right file")
    return qrels
