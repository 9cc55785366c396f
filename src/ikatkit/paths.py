"""Where ikatkit keeps what it computes once: ``$IKATKIT_CACHE``, default ``.cache/ikatkit``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (LLM outputs, compiled Java helpers, OpenVINO models), absolute."""
    return Path(os.environ.get("IKATKIT_CACHE", ".cache/ikatkit")).resolve()
