"""The chat interface every backend shares: caching, deterministic defaults and usage statistics."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from ikatkit.digest import tree_digest
from ikatkit.errors import IkatError
from ikatkit.llm.cache import DiskCache, cache_key

Messages = list[dict[str, str]]
GENERATION_PARAMETERS = ("max_new_tokens", "temperature", "top_p", "seed", "sample", "stop")
SAMPLING_PARAMETERS = ("top_p", "seed", "sample")  # matter only when sampling (temperature > 0)
log = logging.getLogger(__name__)


def cut_at_stop(text: str, stop: list[str] | tuple[str, ...]) -> str:
    """``text`` before the first occurrence of any ``stop`` string, stripped."""
    ends = [text.find(s) for s in stop if s and s in text]
    return (text[: min(ends)] if ends else text).strip()


class LLM:
    """``chat(batch)`` answers a batch of conversations (OpenAI-style messages), one string each.

    Outputs are cached on disk under a key of everything that determines them (backend, model, the adapter's
    content, ``identity()``, messages, generation parameters; when sampling also ``top_p``, ``seed`` and the
    sample index, so n samples are n entries); ``stats`` counts hits, misses, tokens, generation
    seconds and parse fallbacks. Subclasses implement ``_generate(batch, params)`` returning
    ``[(text, prompt_tokens, completion_tokens)]``.
    """

    backend = "base"

    def __init__(self, model: str, *, adapter: str | None = None, max_new_tokens: int = 128,
                 temperature: float = 0.0, top_p: float = 1.0, seed: int = 0, cache_dir: str | None = None) -> None:
        self.model, self.adapter = model, adapter
        self.adapter_id = f"sha256:{tree_digest(adapter)}" if adapter and Path(adapter).exists() else adapter
        self.params: dict[str, Any] = {"max_new_tokens": int(max_new_tokens), "temperature": float(temperature),
                                       "top_p": float(top_p), "seed": int(seed), "sample": 0}
        self.cache = DiskCache(cache_dir) if cache_dir else None
        self.stats: dict[str, float] = {"calls": 0, "hits": 0, "misses": 0, "prompt_tokens": 0,
                                        "completion_tokens": 0, "generate_seconds": 0.0, "parse_fallbacks": 0}

    def identity(self) -> dict[str, Any]:
        """Backend options that change outputs (quantization, GGUF file, ...): part of the cache key."""
        return {}

    def _key(self, messages: Messages, params: dict[str, Any]) -> str:
        if params["temperature"] <= 0:  # greedy: one output whatever the sampling parameters
            params = {k: v for k, v in params.items() if k not in SAMPLING_PARAMETERS}
        return cache_key(backend=self.backend, model=self.model, adapter=self.adapter_id, options=self.identity(),
                         messages=messages, params=params)

    def _generate(self, batch: list[Messages], params: dict[str, Any]) -> list[tuple[str, int, int]]:
        raise NotImplementedError

    def samples(self, batch: list[Messages], n: int, **overrides: Any) -> list[list[str]]:
        """``n`` replies per conversation (samples 0 .. n-1, each cached on its own)."""
        replies = [self.chat(batch, **overrides, sample=i) for i in range(n)]
        return [list(row) for row in zip(*replies)]

    def chat(self, batch: list[Messages], **overrides: Any) -> list[str]:
        """One reply per conversation; ``overrides`` (max_new_tokens, temperature, top_p, seed, sample: the
        sample index; stop) apply to this call only.

        ``stop``: strings that end generation; the reply is cut before the first of them, by every backend."""
        unknown = sorted(set(overrides) - set(GENERATION_PARAMETERS))
        if unknown:
            raise IkatError(f"unknown generation parameter(s) {unknown}", where="LLM.chat",
                            fix=f"use only {GENERATION_PARAMETERS}")
        params = {**self.params, **{k: v for k, v in overrides.items() if k != "stop" or v}}
        keys = [self._key(m, params) for m in batch]
        outputs: dict[int, str] = {}
        todo: list[int] = []
        for i, key in enumerate(keys):
            cached = self.cache.get(key) if self.cache else None
            if cached is not None:
                outputs[i] = cached["text"]
            else:
                todo.append(i)
        self.stats["calls"] += len(batch)
        self.stats["hits"] += len(batch) - len(todo)
        self.stats["misses"] += len(todo)
        if todo:
            start = time.perf_counter()
            generated = self._generate([batch[i] for i in todo], params)
            self.stats["generate_seconds"] += time.perf_counter() - start
            for i, (text, prompt_tokens, completion_tokens) in zip(todo, generated):
                text = outputs[i] = cut_at_stop(text, params.get("stop", ()))
                self.stats["prompt_tokens"] += prompt_tokens
                self.stats["completion_tokens"] += completion_tokens
                if self.cache:
                    self.cache.put(keys[i], {"text": text, "prompt_tokens": prompt_tokens,
                                             "completion_tokens": completion_tokens})
        return [outputs[i] for i in range(len(batch))]

    def count_fallback(self, what: str = "empty LLM output: raw utterance used") -> None:
        """Count (and log) one parse fallback; the count is ``stats["parse_fallbacks"]``."""
        self.stats["parse_fallbacks"] += 1
        log.warning("%s (%d so far)", what, self.stats["parse_fallbacks"])
