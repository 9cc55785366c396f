"""Config options checked against a constructor's signature: known names, values of the annotated types."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.suggest import did_you_mean


class TableView(Mapping[str, Any]):
    """A checked record read as the TOML table it was written as: ``_table()`` is that table (``[[stages]]``,
    ``[resources.NAME]``)."""

    def _table(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


def fits(value: Any, hint: Any) -> bool:
    """Whether a TOML value fits a type hint (ints are floats, bools are not ints, str is a Path)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(fits(value, arg) for arg in typing.get_args(hint))
    hint = typing.get_origin(hint) or hint
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is Path:
        return isinstance(value, str)
    return not isinstance(hint, type) or isinstance(value, hint)


def type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def check_options(function: Any, options: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
    """``options`` against ``function``'s keyword parameters (less ``self`` and ``skip``): one IkatError whose
    ``where`` is the offending key."""
    signature = inspect.signature(function)
    accepted = {n: p for n, p in signature.parameters.items() if n not in ("self", *skip)
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    try:
        hints = typing.get_type_hints(function)
    except (NameError, TypeError):
        hints = {}
    for key, value in options.items():
        if key not in accepted:
            raise IkatError(f"unknown option {key!r}", where=key,
                            fix=did_you_mean(key, accepted, f"use only {sorted(accepted) or 'no options'}"))
        hint = hints.get(key, inspect.Parameter.empty)
        if not fits(value, hint):
            raise IkatError(f"{key} = {value!r} is not of type {type_name(hint)}", where=key,
                            fix=f"give {key} a value of type {type_name(hint)}")
