"""LLM backends behind one chat interface, prompt templates as files, output parsing, a disk cache."""

from __future__ import annotations

import inspect
import json
import tomllib
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.llm.base import LLM

BACKENDS = ("transformers", "openai")


def _backend_class(backend: str) -> type[LLM]:
    if backend == "transformers":
        from ikatkit.llm.hf import TransformersLLM

        return TransformersLLM
    if backend == "openai":
        from ikatkit.llm.openai_backend import OpenAILLM

        return OpenAILLM
    raise IkatError(f"unknown LLM backend {backend!r}", where="llm.backend", fix=f"use one of {BACKENDS}")


def _options(cls: type[LLM]) -> set[str]:
    names: set[str] = set()
    for klass in (cls, LLM):
        names |= {p.name for p in inspect.signature(klass.__init__).parameters.values()
                  if p.kind == p.KEYWORD_ONLY}
    return names

def read_llm_config(path: str | Path) -> dict[str, Any]:
    """An llm resource's options (backend, model, base_url ...) from a JSON file or a TOML file (top level or an
    ``[llm]`` table), e.g. the judge LLM of response evaluation."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("LLM config not found", path=path, fix="pass a TOML or JSON file")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            return dict(json.loads(text))
        data = tomllib.loads(text)
        return dict(data.get("llm", data))
    except (ValueError, TypeError) as err:
        raise IkatError(f"cannot read the LLM config: {err}", path=path,
                        fix="TOML (backend, model, ...) or JSON") from None


def backend_options(backend: str) -> set[str]:
    """The options a config may give an LLM of ``backend`` (its own and the shared ones, with backend and model)."""
    return _options(_backend_class(backend)) | {"backend", "model"}


def make_llm(config: dict[str, Any]) -> LLM:
    """An LLM from a config: ``backend`` (transformers | openai), ``model`` and the backend's options.

    Shared options: adapter, max_new_tokens (128), temperature (0 = greedy), top_k (0 = off), top_p (1 = off),
    seed (of sampled candidates), cache_dir. transformers:
    gguf_file, quantization (4bit | 8bit, GPU only), batch_size, device, dtype, decoding (eager | static).
    openai: base_url, max_concurrency,
    max_retries, timeout (the client's own retries and per-request limit); the key only from OPENAI_API_KEY.
    """
    options = dict(config)
    backend = options.pop("backend", "transformers")
    model = options.pop("model", None)
    if not model:
        raise IkatError("the LLM config has no model", where="llm.model",
                        fix='add model = "bundled:smollm2" (or a hub id / path)')
    cls = _backend_class(backend)
    if "api_key" in options:
        raise IkatError("API keys are not read from configs", where="llm.api_key",
                        fix="remove api_key and export OPENAI_API_KEY instead")
    unknown = sorted(set(options) - _options(cls))
    if unknown:
        raise IkatError(f"unknown option(s) {unknown} for the {backend} backend", where="llm",
                        fix=f"use only {sorted(_options(cls))}")
    return cls(model, **options)


def command_llm(config: str | Path | None, model: str | None, cache: str | Path | None, **options: Any) -> LLM:
    """The LLM a command names: its ``--llm-config`` file's, else ``model`` on the transformers backend; ``options``
    (e.g. max_new_tokens) and its outputs' cache, the ``llm`` folder of ``cache`` (else of the cache root), are
    defaults the file may override."""
    from ikatkit.paths import cache_folder

    named = read_llm_config(config) if config else {"backend": "transformers", "model": model}
    return make_llm({"cache_dir": str(cache_folder("llm", cache)), **options, **named})


__all__ = ["BACKENDS", "LLM", "backend_options", "command_llm", "make_llm"]
