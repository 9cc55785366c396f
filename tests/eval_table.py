"""What ``ikatkit eval`` prints as a table, read here with ``str.split``: the tests of its per-group tables share it."""

from __future__ import annotations


def eval_table(text: str) -> dict[str, dict[str, str]]:
    """The tab-separated table printed by ``ikatkit eval``: ``{row name: {column: cell}}``, the first line the head."""
    head, *rows = [line.split("\t") for line in text.strip().splitlines()]
    return {row[0]: dict(zip(head[1:], row[1:])) for row in rows}
