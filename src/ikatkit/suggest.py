""""Did you mean ...?": the close matches of a mistyped name among those that exist (difflib), for error fixes."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from pathlib import Path

CUTOFF = 0.6  # difflib's default similarity: 'minlm' finds 'minilm', 'rerank_' finds 'rerank'


def close_matches(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` closest to ``name``, best first (none when nothing is close)."""
    return difflib.get_close_matches(name, list(dict.fromkeys(choices)), n=n, cutoff=CUTOFF)


def did_you_mean(name: str, choices: Iterable[str], fix: str = "", show: Callable[[str], str] = str) -> str:
    """``fix`` led by "did you mean 'x'?" when ``choices`` hold a close match of ``name`` (each shown as
    ``show(match)``); else ``fix``."""
    found = close_matches(name, choices)
    if not found:
        return fix
    lead = "did you mean " + " or ".join(repr(show(m)) for m in found) + "?"
    return f"{lead} {fix}" if fix else lead


def path_fix(path: str | Path, fix: str) -> str:
    """``fix`` for a path that does not exist, led by the close names in its folder ("did you mean
    'configs/demo.toml'?"), shown as the path was written."""
    path = Path(path)
    folder = path.parent
    try:
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    except OSError:
        names = []
    return did_you_mean(path.name, names, fix, show=lambda m: str(folder / m) if str(folder) != "." else m)
