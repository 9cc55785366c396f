"""The chat interface every backend shares: caching, deterministic defaults and usage statistics."""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

from ikatkit.digest import tree_digest
from ikatkit.errors import IkatError
from ikatkit.llm.cache import DiskCache, cache_key

Messages = list[dict[str, str]]
GENERATION_PARAMETERS = ("max_new_tokens", "temperature", "top_k", "top_p", "seed", "stop")
SAMPLING_PARAMETERS = ("top_k", "top_p", "seed")
log = logging.getLogger(__name__)


def check_sampling(options: dict[str, Any], count: str, default_count: int) -> None:
    """A stage's sampling options in range: ``count`` (e.g. ``n``) candidates above one need temperature > 0,
    ``top_p`` in (0, 1], ``top_k`` >= 0; one IkatError whose ``where`` is the option's key."""
    if options.get(count, default_count) > 1 and options.get("temperature", 0.7) <= 0:
        raise IkatError(f"{count} > 1 candidates need sampling", where="temperature",
                        fix="set temperature > 0 (e.g. 0.7)")
    if not 0 < options.get("top_p", 1.0) <= 1:
        raise IkatError(f"top_p = {options['top_p']} is outside (0, 1]", where="top_p", fix="set top_p in (0, 1]")
    if options.get("top_k", 50) < 0:
        raise IkatError(f"top_k = {options['top_k']} is negative", where="top_k", fix="set top_k >= 0 (0 = off)")


def cut_at_stop(text: str, stop: list[str] | tuple[str, ...]) -> str:
    """``text`` before the first occurrence of any ``stop`` string, stripped."""
    ends = [text.find(s) for s in stop if s and s in text]
    return (text[: min(ends)] if ends else text).strip()


class LLM:
    """``chat(batch)`` answers a batch of conversations (OpenAI-style messages), one string each.

    ``sample(batch, n)`` draws ``n`` candidates per conversation (temperature > 0, with ``top_k`` / ``top_p``):
    candidate ``i`` of a prompt gets its own random seed, derived from its cache key (which holds ``seed`` and
    ``i``), so it is the same whatever else is in the batch, on a rerun, and after a resume.

    Outputs are cached on disk under a key of everything that determines them (backend, model, adapter,
    ``identity()``, messages, generation parameters, sample index); ``stats`` counts hits, misses, tokens,
    generation seconds and parse fallbacks. Each output is cached as it comes, so a stop mid-batch keeps the rows
    done and the rerun asks only for the rest. Subclasses implement ``_generate(batch, params)`` returning
    ``(text, prompt_tokens, completion_tokens)`` per row in order, best as an iterator; or, when rows finish out
    of order (concurrent requests), ``_stream``, which yields each row's index with its result as it finishes.
    When sampling they get ``seeds=`` too, one per row.
    """

    backend = "base"

    def __init__(self, model: str, *, adapter: str | None = None, max_new_tokens: int = 128,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 cache_dir: str | None = None) -> None:
        self.model, self.adapter = model, adapter
        self.adapter_id = f"sha256:{tree_digest(adapter)}" if adapter and Path(adapter).exists() else adapter
        self.params: dict[str, Any] = {"max_new_tokens": int(max_new_tokens), "temperature": float(temperature),
                                       "top_k": int(top_k), "top_p": float(top_p), "seed": int(seed)}
        self.cache = DiskCache(cache_dir) if cache_dir else None
        self.stats: dict[str, float] = {"calls": 0, "hits": 0, "misses": 0, "prompt_tokens": 0,
                                        "completion_tokens": 0, "generate_seconds": 0.0, "parse_fallbacks": 0}

    def identity(self) -> dict[str, Any]:
        """Backend options that change outputs (quantization, GGUF file, ...): part of the cache key."""
        return {}

    def _key(self, messages: Messages, params: dict[str, Any], sample: int = 0) -> str:
        """The cache key of one candidate. Greedy decoding (temperature 0) ignores the sampling parameters, so
        they and the sample index stay out of its key; a sampled candidate's key holds all of them."""
        if params["temperature"] <= 0:
            params = {k: v for k, v in params.items() if k not in SAMPLING_PARAMETERS}
            return cache_key(backend=self.backend, model=self.model, adapter=self.adapter_id, options=self.identity(),
                             messages=messages, params=params)
        return cache_key(backend=self.backend, model=self.model, adapter=self.adapter_id, options=self.identity(),
                         messages=messages, params=params, sample=sample)

    def _generate(self, batch: list[Messages], params: dict[str, Any],
                  seeds: list[int] | None = None) -> Iterable[tuple[str, int, int]]:
        """(text, prompt tokens, completion tokens) per conversation, in order; ``seeds``, one per row, when
        sampling."""
        raise NotImplementedError

    def _stream(self, batch: list[Messages], params: dict[str, Any],
                seeds: list[int] | None = None) -> Generator[tuple[int, tuple[str, int, int]], None, None]:
        """(row, (text, prompt tokens, completion tokens)) as each row finishes: ``_generate``'s rows in order."""
        yield from enumerate(self._generate(batch, params, seeds) if seeds is not None
                             else self._generate(batch, params))

    def chat(self, batch: list[Messages], **overrides: Any) -> list[str]:
        """One reply per conversation; ``overrides`` (max_new_tokens, temperature, top_k, top_p, seed, stop) apply
        to this call only. ``stop``: strings that end generation; the reply is cut before the first of them, by
        every backend."""
        return [replies[0] for replies in self.sample(batch, 1, **overrides)]

    def sample(self, batch: list[Messages], n: int, **overrides: Any) -> list[list[str]]:
        """``n`` replies per conversation (``n`` > 1 needs temperature > 0), all rows generated as one batch."""
        unknown = sorted(set(overrides) - set(GENERATION_PARAMETERS))
        if unknown:
            raise IkatError(f"unknown generation parameter(s) {unknown}", where="LLM.chat",
                            fix=f"use only {GENERATION_PARAMETERS}")
        params = {**self.params, **{k: v for k, v in overrides.items() if k != "stop" or v}}
        sampling = params["temperature"] > 0
        if n < 1 or (n > 1 and not sampling):
            raise IkatError(f"{n} samples per prompt at temperature {params['temperature']}", where="LLM.sample",
                            fix="ask for n >= 1, and set temperature > 0 for n > 1")
        rows = [(b, i) for b in range(len(batch)) for i in range(n)]
        keys = [self._key(batch[b], params, i) for b, i in rows]
        outputs: dict[int, str] = {}
        todo: list[int] = []
        for r, key in enumerate(keys):
            cached = self.cache.get(key) if self.cache else None
            if cached is not None:
                outputs[r] = cached["text"]
            else:
                todo.append(r)
        self.stats["calls"] += len(rows)
        self.stats["hits"] += len(rows) - len(todo)
        self.stats["misses"] += len(todo)
        if todo:
            start = time.perf_counter()
            prompts = [batch[rows[r][0]] for r in todo]
            generated = self._stream(prompts, params, [int(keys[r][:7], 16) for r in todo] if sampling else None)
            try:  # each output is cached as it comes: a stop mid-batch keeps those, and the rerun asks the rest
                for row, (text, prompt_tokens, completion_tokens) in generated:
                    r = todo[row]
                    text = outputs[r] = cut_at_stop(text, params.get("stop", ()))
                    self.stats["prompt_tokens"] += prompt_tokens
                    self.stats["completion_tokens"] += completion_tokens
                    if self.cache:
                        self.cache.put(keys[r], {"text": text, "prompt_tokens": prompt_tokens,
                                                 "completion_tokens": completion_tokens})
            finally:
                generated.close()
                self.stats["generate_seconds"] += time.perf_counter() - start
            if len(outputs) < len(rows):
                raise IkatError(f"the {self.backend} backend answered {len(outputs) - len(rows) + len(todo)} of "
                                f"{len(todo)} prompts", where="LLM.sample", fix="report this as a bug of the backend")
        return [[outputs[b * n + i] for i in range(n)] for b in range(len(batch))]

    def count_fallback(self, what: str = "empty LLM output: raw utterance used") -> None:
        """Count (and log) one parse fallback; the count is ``stats["parse_fallbacks"]``."""
        self.stats["parse_fallbacks"] += 1
        log.warning("%s (%d so far)", what, self.stats["parse_fallbacks"])
