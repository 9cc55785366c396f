"""Where ikatkit keeps what it computes once: ``$IKATKIT_CACHE``, default ``.cache/ikatkit``.

Within :func:`cache_at` (``ikatkit run --cache DIR``) the root is another folder, for everything cached there
(Java helpers and OpenVINO models included); no environment variable is changed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

_CHOSEN: ContextVar[Path | None] = ContextVar("ikatkit_cache", default=None)


def cache_root() -> Path:
    """The cache folder (LLM outputs, compiled Java helpers, OpenVINO models), absolute."""
    chosen = _CHOSEN.get()
    return chosen if chosen is not None else Path(os.environ.get("IKATKIT_CACHE", ".cache/ikatkit")).resolve()


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
