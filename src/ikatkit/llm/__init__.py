"""LLM backends behind one chat interface, prompt templates as files, output parsing, a disk cache."""

from __future__ import annotations

from typing import Any

from ikatkit.errors import IkatError
from ikatkit.llm.base import LLM


def make_llm(config: dict[str, Any]) -> LLM:
    """An LLM from a config: ``backend`` (transformers | openai), ``model`` and the backend's options."""
    options = dict(config)
    backend = options.pop("backend", "transformers")
    model = options.pop("model", None)
    if not model:
        raise IkatError("the LLM config has no model", fix='add model = "bundled:smollm2" (or a hub id / path)')
    if backend == "transformers":
        from ikatkit.llm.hf import TransformersLLM

        return TransformersLLM(model, **options)
    if backend == "openai":
        from ikatkit.llm.openai_backend import OpenAILLM

        return OpenAILLM(model, **options)
    raise IkatError(f"unknown LLM backend {backend!r}", fix="use transformers or openai")


__all__ = ["LLM", "make_llm"]
