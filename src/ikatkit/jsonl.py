"""JSON Lines, read and written by the ``jsonlines`` library, with each record's line number for messages."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

import jsonlines

Invalid = jsonlines.InvalidLineError


class _Numbered:
    """The lines of ``handle``; ``number`` is that of the last line handed out."""

    def __init__(self, handle: Iterable[str]) -> None:
        self.handle, self.number = handle, 0

    def __iter__(self) -> Iterator[str]:
        for self.number, line in enumerate(self.handle, start=1):
            yield line


def records(handle: Iterable[str]) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of text (:func:`ikatkit.textfile.open_text` checked its
    UTF-8 and decompression); a line that is not JSON (or is ``null``) gives its
    ``jsonlines.InvalidLineError`` as the value, so callers decide whether to skip it or stop."""
    lines = _Numbered(handle)
    reader = jsonlines.Reader(lines)
    while True:
        try:
            value = reader.read(skip_empty=True)
        except EOFError:
            return
        except Invalid as err:
            yield err.lineno, err
            continue
        yield lines.number, value


def problem(err: Invalid) -> str:
    """What is wrong with an invalid line, in a few words (the JSON error's message)."""
    cause = err.__cause__
    if isinstance(cause, json.JSONDecodeError):
        return f"invalid JSON ({cause.msg})"
    return "null instead of a JSON object"


def write(handle: IO[str], values: Iterable[Any]) -> None:
    """One JSON object per line, UTF-8 as is (``json.dumps(record, ensure_ascii=False)`` per line)."""
    with jsonlines.Writer(handle) as writer:
        writer.write_all(values)
