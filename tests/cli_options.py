"""The options of every `ikatkit` command, from the real argparse parsers, and the options a fix text names."""

from __future__ import annotations

import argparse
import re
from functools import lru_cache

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
COMMAND = re.compile(r"`ikatkit ([^`]*)`")


@lru_cache(maxsize=1)
def parsers() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every parser by its command words: ``()``, ``("run",)``, ``("index", "build")``."""
    from ikatkit.cli import build_parser

    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        found[words] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name))

    walk(build_parser(), ())
    return found


def options(words: tuple[str, ...]) -> set[str]:
    return {o for action in parsers()[words]._actions for o in action.option_strings}


def command_of(text: str) -> tuple[tuple[str, ...], str]:
    """The longest command a backticked ``ikatkit ...`` names, and the rest of its text."""
    words = text.split()
    for n in range(len(words), 0, -1):
        if tuple(words[:n]) in parsers():
            return tuple(words[:n]), " ".join(words[n:])
    raise AssertionError(f"`ikatkit {text}` names no command")


def missing(fix: str, words: tuple[str, ...]) -> list[str]:
    """The options ``fix`` names that the command ``words`` lacks (options of a backticked `ikatkit ...` command
    are checked against that command)."""
    lacking = []
    for quoted in COMMAND.findall(fix):
        named, rest = command_of(quoted)
        lacking += [o for o in OPTION.findall(rest) if o not in options(named)]
    outside = COMMAND.sub("", fix)
    return lacking + [o for o in OPTION.findall(outside) if o not in options(words)]
