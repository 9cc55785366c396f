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
    """``fix`` for a path that is not what was wanted, shown as the path was written. A path that does not exist:
    led by the close names in its folder ("did you mean 'configs/demo.toml'?"). A path that exists is of the other
    kind (a file where a folder was wanted, or the reverse): said so, led by the close names of the wanted kind;
    never the path typed."""
    path = Path(path)
    folder = path.parent
    exists = path.is_dir() or path.is_file()
    try:
        names = [p.name for p in folder.iterdir() if p.name != path.name
                 and (not exists or p.is_dir() != path.is_dir())] if folder.is_dir() else []
    except OSError:
        names = []
    if exists:
        fix = f"it is a {'folder' if path.is_dir() else 'file'}, not a {'file' if path.is_dir() else 'folder'}: {fix}"
    return did_you_mean(path.name, names, fix, show=lambda m: str(folder / m) if str(folder) != "." else m)
