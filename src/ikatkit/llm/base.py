"""The chat interface every backend shares: caching, deterministic defaults and usage statistics."""

from __future__ import annotations

from typing import Any

from ikatkit.llm.cache import DiskCache, cache_key

Messages = list[dict[str, str]]


class LLM:
    """``chat(batch)`` answers a batch of conversations (OpenAI-style messages), one string each.

    Subclasses implement ``_generate(batch) -> [(text, prompt_tokens, completion_tokens)]``.
    """

    backend = "base"

    def __init__(self, model: str, *, adapter: str | None = None, max_new_tokens: int = 128,
                 temperature: float = 0.0, cache_dir: str | None = None) -> None:
        self.model, self.adapter = model, adapter
        self.max_new_tokens, self.temperature = max_new_tokens, temperature
        self.cache = DiskCache(cache_dir) if cache_dir else None
        self.stats: dict[str, int] = {"calls": 0, "hits": 0, "misses": 0, "prompt_tokens": 0,
                                      "completion_tokens": 0, "parse_fallbacks": 0}

    def _key(self, messages: Messages) -> str:
        return cache_key(backend=self.backend, model=self.model, adapter=self.adapter, messages=messages,
                         max_new_tokens=self.max_new_tokens, temperature=self.temperature)

    def _generate(self, batch: list[Messages]) -> list[tuple[str, int, int]]:
        raise NotImplementedError

    def chat(self, batch: list[Messages]) -> list[str]:
        outputs: dict[int, str] = {}
        todo: list[int] = []
        keys = [self._key(m) for m in batch]
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
            for i, (text, prompt_tokens, completion_tokens) in zip(todo, self._generate([batch[i] for i in todo])):
                outputs[i] = text
                self.stats["prompt_tokens"] += prompt_tokens
                self.stats["completion_tokens"] += completion_tokens
                if self.cache:
                    self.cache.put(keys[i], {"text": text, "prompt_tokens": prompt_tokens,
                                             "completion_tokens": completion_tokens})
        return [outputs[i] for i in range(len(batch))]

    def count_fallback(self) -> None:
        self.stats["parse_fallbacks"] += 1
