"""Where the run viewer (:mod:`ikatkit.viewer`) puts a turn: its page and anchor, for the viewer and for links to it
(the report's plots). A turn's key is :attr:`~ikatkit.runs.model.TurnResult.key`: its query id (``9-1_3``), and
for a 2026 run the user's id before it (``u2/1-1_3``): one page per conversation, and per user where a topic is
played by several (``u2/1-1``)."""

from __future__ import annotations

import re

from ikatkit.runs.model import split_turn_key, user_turn_key


def page_of(key: str) -> str:
    """The page of a turn key: its conversation, and for a 2026 run its user (``u3/1-1``)."""
    user, qid = split_turn_key(key)
    return user_turn_key(user, qid.rpartition("_")[0] or qid)


def conversation_of(page: str) -> str:
    """The conversation of a page (or of a turn key: its query id)."""
    return split_turn_key(page)[1]


def user_of(page: str) -> str:
    """The user of a page or turn key ("" where no user is named)."""
    return split_turn_key(page)[0] or ""


def turn_number(key: str) -> int:
    """The turn's number in its conversation (0 where the key has none)."""
    tail = conversation_of(key).rpartition("_")[2]
    return int(tail) if tail.isdigit() else 0


def page_file(page: str) -> str:
    """The file of a conversation's page, relative to the viewer's folder."""
    return "c/" + re.sub(r"[^A-Za-z0-9_.-]", "_", page) + ".html"


def turn_url(key: str) -> str:
    """A turn's address in the viewer, relative to its folder (``c/9-1.html#t3``)."""
    return f"{page_file(page_of(key))}#t{turn_number(key)}"
