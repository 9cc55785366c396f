"""OpenAI and OpenAI-compatible servers (vLLM, llama.cpp server, Ollama) through the ``openai`` client.

The key comes only from ``OPENAI_API_KEY``; a loopback ``base_url`` gets a placeholder when none is set.
Requests run in a bounded thread pool; the client itself retries rate limits, server errors, timeouts and
connection errors (``max_retries``, exponential backoff with jitter, honouring ``Retry-After``) and bounds each
request by ``timeout``; authentication and unknown-model errors stop at once with a clear message.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any
from urllib.parse import urlparse

from ikatkit.errors import IkatError
from ikatkit.llm.base import LLM, Messages

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class OpenAILLM(LLM):
    backend = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, max_concurrency: int = 4, max_retries: int = 5,
                 timeout: float = 120.0, **options: Any) -> None:
        super().__init__(model, **options)
        if self.adapter:
            raise IkatError("the openai backend cannot load a LoRA adapter", where="llm.adapter",
                            fix="serve the adapter from the server (e.g. vLLM --lora-modules) and name it as model")
        import openai

        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            if base_url and urlparse(base_url).hostname in LOOPBACK:
                key = "no-key-for-local-server"
            else:
                raise IkatError("OPENAI_API_KEY is not set", where="environment",
                                fix="export OPENAI_API_KEY=... (keys never go in configs)")
        self.client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout)
        self.errors = openai
        self.max_concurrency, self.max_retries = max(1, int(max_concurrency)), max_retries
        self.where = base_url or "api.openai.com"

    def identity(self) -> dict[str, Any]:
        """The server is part of the cache key: one model name can mean different models on different servers."""
        return {"base_url": self.where}

    def _one(self, messages: Messages, params: dict[str, Any], seed: int | None) -> tuple[str, int, int]:
        errors = self.errors
        stop = {"stop": list(params["stop"])[:4]} if params.get("stop") else {}  # the API takes up to 4
        sampling: dict[str, Any] = {}
        if seed is not None:  # one request per candidate, each with its own seed (honoured by llama.cpp, vLLM)
            sampling = {"seed": seed, "top_p": params["top_p"]}
            if params["top_k"] > 0:  # not an OpenAI parameter: sent as an extra field compatible servers read
                sampling["extra_body"] = {"top_k": params["top_k"]}
        try:
            # plain role/content dicts and keyword dicts, where openai's overloads want its TypedDicts and literals
            reply = self.client.chat.completions.create(model=self.model, messages=messages,  # type: ignore[call-overload]
                                                        max_tokens=params["max_new_tokens"],
                                                        temperature=params["temperature"],
                                                        **sampling, **stop)
        except (errors.AuthenticationError, errors.PermissionDeniedError) as err:
            raise IkatError(f"the server refused the API key (HTTP {err.status_code})", where=self.where,
                            fix="check OPENAI_API_KEY") from None
        except errors.NotFoundError:
            raise IkatError(f"model {self.model!r} not found", where=self.where,
                            fix="set `model` to one the server serves (GET /v1/models lists them)") from None
        except (errors.RateLimitError, errors.InternalServerError, errors.APIConnectionError) as err:
            from ikatkit.llm.server import exit_report, rebuild_fix

            died = exit_report(self.where)
            if died:
                raise IkatError(f"{type(err).__name__}: {died}", where=self.where,
                                fix="its log lines say why; a crash on this CPU (SIGSEGV, SIGILL): "
                                    + rebuild_fix(None)) from None
            raise IkatError(f"giving up after {self.max_retries + 1} attempts: {type(err).__name__}: {err}",
                            where=self.where, fix="check that the server runs, or raise max_retries") from None
        except errors.APIStatusError as err:
            raise IkatError(f"the server rejected the request (HTTP {err.status_code}): {err.message}",
                            where=self.where, fix="check the model's context length and max_new_tokens") from None
        usage = reply.usage
        return ((reply.choices[0].message.content or "").strip(),
                usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)

    def _stream(self, batch: list[Messages], params: dict[str, Any],
                seeds: list[int] | None = None) -> Generator[tuple[int, tuple[str, int, int]], None, None]:
        """The rows concurrently (``max_concurrency`` requests at a time), one request per row, each yielded as
        its request finishes."""
        row_seeds = seeds if seeds is not None else [None] * len(batch)
        pool = ThreadPoolExecutor(max_workers=self.max_concurrency)
        try:
            futures = {pool.submit(self._one, messages, params, seed): row
                       for row, (messages, seed) in enumerate(zip(batch, row_seeds))}
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:  # on a stop (ikatkit.stopping), the queued requests are dropped and those under way not waited for
            pool.shutdown(wait=False, cancel_futures=True)
