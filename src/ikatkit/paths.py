"""Where ikatkit keeps what it computes once (LLM outputs, compiled Java helpers, OpenVINO models).

``$IKATKIT_CACHE`` when set; else ``.cache/ikatkit`` of the ikatkit checkout the user stands in (the folder, or a
folder above it, whose ``pyproject.toml`` names the ``ikatkit`` project); else the user's cache folder,
``$XDG_CACHE_HOME/ikatkit`` or ``~/.cache/ikatkit`` (an installed wheel never writes into the working folder).
Within :func:`cache_at` the root is another folder, for everything cached there (Java helpers and OpenVINO models
included); no environment variable is changed. It is the one way to choose the root: ``--cache DIR`` of ``run`` and
``interactive``, and the ``cache_dir`` of :func:`~ikatkit.pipelines.runner.run_pipeline`,
:func:`~ikatkit.interactive.driver.run_interactive` and :func:`~ikatkit.training.refiner.train_refiner`, enter it;
``ikatkit demo`` enters it with ``<out>/cache``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

_CHOSEN: ContextVar[Path | None] = ContextVar("ikatkit_cache", default=None)


def checkout_root(start: Path | None = None) -> Path | None:
    """The ikatkit checkout ``start`` (default: the working folder) lies in, or None."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                name = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("name")
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                name = None
            if name == "ikatkit":
                return folder
    return None


def cache_root() -> Path:
    """The cache folder (LLM outputs, compiled Java helpers, OpenVINO models), absolute."""
    chosen = _CHOSEN.get()
    if chosen is not None:
        return chosen
    if os.environ.get("IKATKIT_CACHE"):
        return Path(os.environ["IKATKIT_CACHE"]).resolve()
    checkout = checkout_root()
    if checkout is not None:
        return checkout / ".cache" / "ikatkit"
    user = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return (Path(user) / "ikatkit").resolve()


def cache_folder(part: str, cache: str | Path | None = None) -> Path:
    """The folder of one kind of cached output (``llm``, ``embeddings`` ...) under ``cache`` or :func:`cache_root`."""
    return (Path(cache).resolve() if cache else cache_root()) / part


@contextmanager
def cache_at(cache: str | Path | None) -> Iterator[Path]:
    """Within the block, :func:`cache_root` is ``cache`` (None: unchanged)."""
    token = _CHOSEN.set(Path(cache).resolve()) if cache else None
    try:
        yield cache_root()
    finally:
        if token is not None:
            _CHOSEN.reset(token)
