"""The replies of the HTTP test doubles on loopback: a JSON answer sent by a ``BaseHTTPRequestHandler``, and an
OpenAI-compatible chat completion's body."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_json(handler: BaseHTTPRequestHandler, body: Any, status: int = 200) -> None:
    """Answer the handler's request with ``body`` as JSON (bytes are sent as they are) and ``status``."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def completion(content: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """A chat completion of model ``m`` whose one choice says ``content``, with its token counts."""
    return {"id": "1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
