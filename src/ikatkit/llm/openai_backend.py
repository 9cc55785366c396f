"""OpenAI and OpenAI-compatible servers (vLLM, llama.cpp server, Ollama) through the ``openai`` client.

The key comes only from ``OPENAI_API_KEY``; a loopback ``base_url`` gets a placeholder when none is set.
Requests run in a bounded thread pool and are retried with exponential backoff on rate limits, server
errors and connection errors; authentication and unknown-model errors stop at once with a clear message.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

from ikatkit.errors import IkatError
from ikatkit.llm.base import LLM, Messages

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class OpenAILLM(LLM):
    backend = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, max_concurrency: int = 4, max_retries: int = 5,
                 backoff: float = 1.0, timeout: float = 120.0, **options) -> None:  # type: ignore[no-untyped-def]
        super().__init__(model, **options)
        import openai

        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            if base_url and urlparse(base_url).hostname in LOOPBACK:
                key = "no-key-for-local-server"
            else:
                raise IkatError("OPENAI_API_KEY is not set", fix="export OPENAI_API_KEY=... (never put keys in configs)")
        self.client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout)
        self.errors = openai
        self.max_concurrency, self.max_retries, self.backoff = max_concurrency, max_retries, backoff
        self.base_url = base_url

    def _one(self, messages: Messages) -> tuple[str, int, int]:
        errors = self.errors
        for attempt in range(self.max_retries + 1):
            try:
                reply = self.client.chat.completions.create(model=self.model, messages=messages,
                                                            max_tokens=self.max_new_tokens,
                                                            temperature=self.temperature)
                usage = reply.usage
                return ((reply.choices[0].message.content or "").strip(),
                        usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)
            except errors.AuthenticationError as err:
                raise IkatError(f"the server refused the API key ({err.status_code})", where=self.base_url or "OpenAI",
                                fix="check OPENAI_API_KEY") from None
            except errors.NotFoundError:
                raise IkatError(f"model {self.model!r} not found", where=self.base_url or "OpenAI",
                                fix="set `model` to one the server serves") from None
            except (errors.RateLimitError, errors.InternalServerError, errors.APIConnectionError,
                    errors.APITimeoutError):
                if attempt == self.max_retries:
                    raise
                time.sleep(self.backoff * 2 ** attempt)
        raise AssertionError("unreachable")

    def _generate(self, batch: list[Messages]) -> list[tuple[str, int, int]]:
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(self._one, batch))
