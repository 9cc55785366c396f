"""Robust parsing of LLM outputs: lists, quotes, echoed prefixes, chatty introductions. An empty result is
returned as such so that the caller falls back to the raw utterance and counts it (``LLM.count_fallback``)."""

from __future__ import annotations

import re

_PREFIX = re.compile(r"^\s*(#+\s*)?((sure|ok(ay)?|certainly)[,!.]?\s*)?(here('s| is| are)\b[^:]*:\s*)?"
                     r"((the\s+)?(rewritten( user)? question|rewrite|question|query|queries|answer)\s*[:\-]\s*)?", re.I)
_BULLET = re.compile(r"^\s*(\d+[.)]|[-*•])\s+")


def _clean(line: str) -> str:
    line = _BULLET.sub("", _PREFIX.sub("", line.strip(), count=1)).strip()
    return line.strip("\"'“”‘’`").strip()


def output_lines(output: str) -> list[str]:
    """Cleaned non-empty lines, without echoed section headers and introductions ending in a colon."""
    return [c for c in map(_clean, output.splitlines()) if c and not c.startswith("###") and not c.endswith(":")]


def parse_rewrite(output: str) -> str:
    """The first non-empty line of a rewrite, without prefixes and quotes ('' when there is none)."""
    lines = output_lines(output)
    return lines[0] if lines else ""


def parse_queries(output: str, limit: int = 5) -> list[str]:
    """Up to ``limit`` distinct queries, one per line, numbering and bullets removed."""
    queries: list[str] = []
    for line in output_lines(output):
        if line.lower() not in (q.lower() for q in queries):
            queries.append(line)
    return queries[:limit]


def parse_ptkb_classification(output: str, keys: list[str]) -> list[str]:
    """The PTKB keys named in the output, in the PTKB's order ('none' or no known key -> [])."""
    named = set(re.findall(r"\d+", output))
    return [key for key in keys if key in named]


SUPPORT_LABELS = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}


def parse_support(output: str) -> float | None:
    """The support a nugget-assignment output names: support 1, partial_support 0.5, not_support 0 (also
    yes / partial / no); None when it names none."""
    text = output.lower().replace("-", "_").replace(" ", "_")
    for label, words in (("partial_support", ("partial",)), ("not_support", ("not_support", "no_support", "unsupport")),
                         ("support", ("support",))):
        if any(word in text for word in words):
            return SUPPORT_LABELS[label]
    first = re.findall(r"[a-z]+", output.lower())[:1]
    return {"yes": 1.0, "partially": 0.5, "no": 0.0}.get(first[0]) if first else None


SOURCES = ("ptkb", "passages")
_PLAN = re.compile(r"(\[SOURCE\]\s*)?(NULL|PTKB|PASSAGES|PTKB\s*,\s*PASSAGES)(\s*\[EOS\])?", re.I)


def parse_sources(output: str) -> list[str] | None:
    """The sources of a source-planning output in UniMS-RAG's tokens, strictly: its first non-empty line must be
    ``[SOURCE] NULL|PTKB|PASSAGES|PTKB, PASSAGES [EOS]`` (markers optional, any case) and nothing else. NULL is
    ``[]``; anything else is ``None`` (the caller falls back and counts it)."""
    line = next((line.strip() for line in output.splitlines() if line.strip()), "")
    match = _PLAN.fullmatch(line)
    if not match:
        return None
    named = match.group(2).upper()
    return [source for source in SOURCES if source.upper() in named]
