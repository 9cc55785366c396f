"""Where the run viewer (:mod:`ikatkit.viewer`) puts a turn: its page and anchor, for the viewer and for links to it
(the report's plots). A turn's key is its query id (``9-1_3``), and for a 2026 run the user's id after ``@``
(``1-1_3@u2``): one page per conversation, and per user where a topic is played by several."""

from __future__ import annotations

import re


def page_of(key: str) -> str:
    """The page of a turn key: its conversation, and for a 2026 run its user (``1-1@u3``)."""
    qid, _, user = key.partition("@")
    conversation = qid.rpartition("_")[0] or qid
    return f"{conversation}@{user}" if user else conversation


def turn_number(key: str) -> int:
    """The turn's number in its conversation (0 where the key has none)."""
    tail = key.partition("@")[0].rpartition("_")[2]
    return int(tail) if tail.isdigit() else 0


def page_file(page: str) -> str:
    """The file of a conversation's page, relative to the viewer's folder."""
    return "c/" + re.sub(r"[^A-Za-z0-9_.-]", "_", page) + ".html"


def turn_url(key: str) -> str:
    """A turn's address in the viewer, relative to its folder (``c/9-1.html#t3``)."""
    return f"{page_file(page_of(key))}#t{turn_number(key)}"
