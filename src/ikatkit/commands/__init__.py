"""The ``ikatkit`` subcommands, one module per group, each with ``add(sub)``; :func:`default` reads a default."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def default(function: Callable[..., Any], parameter: str) -> Any:
    """The default of ``function``'s ``parameter``: option defaults come from the API, never retyped."""
    return inspect.signature(function).parameters[parameter].default
