"""The LLM layer with real models: SmolLM2 through transformers and through a real llama.cpp server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ikatkit.errors import IkatError
from ikatkit.llm import make_llm
from ikatkit.llm.parse import parse_ptkb_classification, parse_queries, parse_rewrite
from ikatkit.llm.prompts import TASKS, render
from ikatkit.models import resolve_model

QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


def test_transformers_backend_is_deterministic_and_cached(tmp_path):
    llm = make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 16,
                    "cache_dir": str(tmp_path / "cache")})
    history = [("Can you help me find a diet?", "Sure: the Mediterranean diet suits you.")]
    batch = [QUESTION, render("rtg_rewrite", history=history, utterance="Is it expensive?")]
    first = llm.chat(batch)
    assert "Paris" in first[0] and first[1].strip()
    assert llm.stats["misses"] == 2 and llm.stats["completion_tokens"] > 0
    assert llm.chat(batch) == first and llm.stats["hits"] == 2
    fresh = make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 16})
    assert fresh.chat(batch) == first  # greedy decoding: the same text without the cache


def test_prompts_render_every_task():
    for task in TASKS:
        messages = render(task, history=[("Hi", "Hello")], utterance="u?", query="q?", ptkb=["I am tall."],
                          all_ptkb=[("1", "I am tall.")], passages=["p one", "p two"], answer="a", n=3, response="r")
        assert messages[0]["role"] == "user" and "{" not in messages[0]["content"]
    rewrite = render("rtg_rewrite", history=[("Hi", "Hello")], utterance="u?")[0]["content"]
    assert "### Conversational Context:\nUser: Hi\nSystem: Hello" in rewrite and rewrite.endswith("### Rewritten User Question:")


def test_parsers():
    assert parse_rewrite('Rewritten question: "Is the Mediterranean diet expensive?"\nmore') == \
        "Is the Mediterranean diet expensive?"
    assert parse_rewrite("  \n") == ""
    assert parse_queries("1. vegan protein\n2) tofu protein\n- vegan protein\n* lentils", limit=5) == \
        ["vegan protein", "tofu protein", "lentils"]
    assert parse_queries("a\nb\nc\nd\ne\nf", limit=5) == ["a", "b", "c", "d", "e"]
    assert parse_ptkb_classification("Statements 2 and 10 are relevant.", ["1", "2", "10"]) == ["2", "10"]
    assert parse_ptkb_classification("none", ["1", "2"]) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server():
    """A real llama.cpp server (llama-cpp-python) serving the bundled SmolLM2 GGUF on loopback."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed by `make setup-test`")
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", resolve_model("bundled:smollm2"),
                                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/models", timeout=1)
                break
            except OSError:
                if process.poll() is not None:
                    pytest.fail("llama.cpp server exited")
                time.sleep(0.5)
        else:
            pytest.fail("llama.cpp server did not answer within 60 s")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_openai_backend_against_llama_cpp_server(llama_server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = make_llm({"backend": "openai", "model": "smollm2", "base_url": llama_server, "max_new_tokens": 16,
                    "max_concurrency": 2, "cache_dir": str(tmp_path / "cache")})
    outputs = llm.chat([QUESTION, QUESTION, [{"role": "user", "content": "Name a fruit."}]])
    assert "Paris" in outputs[0] and outputs[0] == outputs[1] and outputs[2].strip()
    assert llm.stats["prompt_tokens"] > 0 and llm.stats["completion_tokens"] > 0
    assert llm.chat([QUESTION]) == outputs[:1] and llm.stats["hits"] == 1


class _Double(BaseHTTPRequestHandler):
    """Unit-test double beside the real server above: scripted status codes for retries and auth errors."""

    script: list[int] = []

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status = self.script.pop(0) if self.script else 200
        body = {"error": {"message": "scripted", "type": "x"}} if status != 200 else {
            "id": "1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


def test_retries_and_clear_errors(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server = HTTPServer(("127.0.0.1", 0), _Double)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        _Double.script = [429, 503]
        llm = make_llm({"backend": "openai", "model": "m", "base_url": base, "backoff": 0.01})
        assert llm.chat([QUESTION]) == ["ok"] and _Double.script == []
        _Double.script = [401]
        with pytest.raises(IkatError, match="refused the API key"):
            llm.chat([[{"role": "user", "content": "other"}]])
        _Double.script = [404]
        with pytest.raises(IkatError, match="model 'm' not found"):
            llm.chat([[{"role": "user", "content": "third"}]])
    finally:
        server.shutdown()
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(IkatError, match="OPENAI_API_KEY is not set"):
        make_llm({"backend": "openai", "model": "gpt-4"})
