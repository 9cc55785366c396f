"""Robust parsing of LLM outputs: lists, quotes, echoed prefixes. Empty results are returned as such so
that the caller falls back (and counts it)."""

from __future__ import annotations

import re

_PREFIX = re.compile(r"^\s*(#+\s*)?(rewritten( user)? question|rewrite|question|query|queries|answer)\s*[:\-]\s*",
                     re.I)
_BULLET = re.compile(r"^\s*(\d+[.)]|[-*•])\s*")


def _clean(line: str) -> str:
    line = _BULLET.sub("", _PREFIX.sub("", line.strip()))
    return line.strip().strip("\"'“”‘’`").strip()


def parse_rewrite(output: str) -> str:
    """The first non-empty line of a rewrite, without prefixes and quotes ('' when there is none)."""
    for line in output.splitlines():
        cleaned = _clean(line)
        if cleaned and not cleaned.startswith("###"):
            return cleaned
    return ""


def parse_queries(output: str, limit: int = 5) -> list[str]:
    """Up to ``limit`` distinct queries, one per line, numbering and bullets removed."""
    queries: list[str] = []
    for line in output.splitlines():
        cleaned = _clean(line)
        if cleaned and not cleaned.startswith("###") and cleaned.lower() not in (q.lower() for q in queries):
            queries.append(cleaned)
    return queries[:limit]


def parse_ptkb_classification(output: str, keys: list[str]) -> list[str]:
    """The PTKB keys named in the output, in the PTKB's order ('none' or no known key -> [])."""
    named = set(re.findall(r"\d+", output))
    return [key for key in keys if key in named]
