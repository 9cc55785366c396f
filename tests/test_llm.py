"""The LLM layer with real models: SmolLM2 through transformers and through a real llama.cpp server."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ikatkit.errors import IkatError
from ikatkit.llm import command_llm, make_llm
from ikatkit.llm.cache import DiskCache, cache_key
from ikatkit.llm.parse import parse_ptkb_classification, parse_queries, parse_rewrite
from ikatkit.llm.prompts import TASKS, render
from ikatkit.llm.server import llama_cpp_server

from chat_double import completion, send_json

QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """The bundled SmolLM2 GGUF through transformers, loaded once for this module, with a disk cache."""
    return make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 16,
                     "cache_dir": str(tmp_path_factory.mktemp("llm") / "cache")})


def test_transformers_backend_is_deterministic_and_cached(smollm2):
    history = [("Can you help me find a diet?", "Sure: the Mediterranean diet suits you.")]
    batch = [QUESTION, render("rtg_rewrite", history=history, utterance="Is it expensive?")]
    first = smollm2.chat(batch)
    assert "Paris" in first[0] and parse_rewrite(first[1])
    assert smollm2.stats["misses"] == 2 and smollm2.stats["hits"] == 0 and smollm2.stats["completion_tokens"] > 0
    tokens = smollm2.stats["completion_tokens"]
    assert smollm2.chat(batch) == first and smollm2.stats["hits"] == 2 and smollm2.stats["completion_tokens"] == tokens
    cache, smollm2.cache = smollm2.cache, None
    try:
        assert smollm2.chat(batch) == first  # greedy decoding: the same text without the cache
        tokens = smollm2.stats["completion_tokens"]
        short = smollm2.chat([QUESTION], max_new_tokens=2)[0]  # a per-call override
    finally:
        smollm2.cache = cache
    assert smollm2.stats["completion_tokens"] - tokens == 2 and first[0].startswith(short) and short != first[0]
    with pytest.raises(IkatError, match="unknown generation parameter"):
        smollm2.chat([QUESTION], beam_width=3)


def test_stop_strings_end_the_reply_only(smollm2):
    """A stop string ends generation inside the reply, never across the prompt's end: the chat template ends in a
    new line, so a stop "\n" + the reply's first word must not fire (transformers' stop_strings would)."""
    cache, smollm2.cache = smollm2.cache, None
    try:
        before = smollm2.stats["completion_tokens"]
        full = smollm2.chat([QUESTION])[0]
        tokens = smollm2.stats["completion_tokens"] - before
        word = full.split()[-1]
        stopped = smollm2.chat([QUESTION], stop=[word])[0]
        used = smollm2.stats["completion_tokens"] - before - tokens
        opening = smollm2.chat([QUESTION], stop=["\n" + full.split()[0]])[0]
    finally:
        smollm2.cache = cache
    assert stopped == full[: full.index(word)].strip() and used <= tokens
    assert opening == full


def test_lora_adapter_changes_outputs(smollm2, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)  # random (not zero) LoRA weights, scaled up so that the adapter surely changes outputs
    adapted = get_peft_model(smollm2.network, LoraConfig(r=4, lora_alpha=256, target_modules=["q_proj", "v_proj"],
                                                         init_lora_weights=False))
    adapted.save_pretrained(tmp_path / "adapter")
    smollm2.network = adapted.unload()
    llm = make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 8,
                    "adapter": str(tmp_path / "adapter")})
    base = smollm2.chat([QUESTION], max_new_tokens=8)
    adapted_output = llm.chat([QUESTION])
    assert adapted_output != base and llm.chat([QUESTION]) == adapted_output and "Paris" in base[0]
    assert llm._key(QUESTION, llm.params) != smollm2._key(QUESTION, llm.params)
    with pytest.raises(IkatError, match="adapter_config.json missing"):
        make_llm({"backend": "transformers", "model": "bundled:smollm2", "adapter": str(tmp_path)})


def test_config_errors(monkeypatch):
    with pytest.raises(IkatError, match="unknown option"):
        make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_tokens": 5})
    with pytest.raises(IkatError, match="not read from configs"):
        make_llm({"backend": "openai", "model": "gpt-4", "api_key": "sk-x"})
    with pytest.raises(IkatError, match="unknown LLM backend"):
        make_llm({"backend": "vllm", "model": "m"})
    with pytest.raises(IkatError, match="has no model"):
        make_llm({"backend": "openai"})
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(IkatError, match="needs a CUDA GPU"):
            make_llm({"backend": "transformers", "model": "bundled:smollm2", "quantization": "4bit"})


def test_command_llm_caches_under_the_command_cache_unless_the_file_says(tmp_path):
    """--llm-config's LLM caches in the llm folder of --cache; a cache_dir in the file wins; --model alone is the
    transformers backend with the command's options."""
    config = tmp_path / "judge.toml"
    config.write_text('[llm]\nbackend = "openai"\nmodel = "judge"\nbase_url = "http://127.0.0.1:9/v1"\n')
    llm = command_llm(config, "ignored", tmp_path / "cache")
    assert llm.model == "judge" and llm.cache.folder == (tmp_path / "cache" / "llm").resolve()
    config.write_text(config.read_text() + f'cache_dir = "{tmp_path / "own"}"\n')
    assert command_llm(config, None, tmp_path / "cache").cache.folder == tmp_path / "own"
    assert command_llm(config, None, tmp_path / "cache", max_new_tokens=7).params["max_new_tokens"] == 7  # a default
    config.write_text(config.read_text() + "max_new_tokens = 9\n")
    assert command_llm(config, None, tmp_path / "cache", max_new_tokens=7).params["max_new_tokens"] == 9  # the file's
    with pytest.raises(IkatError, match=r"unknown option\(s\) \['max_tokens'\] for the transformers backend"):
        command_llm(None, "bundled:smollm2", tmp_path / "cache", max_tokens=5)


def test_cache_survives_concurrent_writers_and_torn_files(tmp_path):
    cache = DiskCache(tmp_path)
    key = cache_key(backend="x", messages=QUESTION)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: cache.put(key, {"text": f"t{i % 2}"}), range(64)))
    assert cache.get(key)["text"] in ("t0", "t1")
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{key}.json"]  # no temporary leftovers
    (tmp_path / key[:2] / f"{key}.json").write_text('{"text": "hal', encoding="utf-8")  # a torn file: a miss
    assert cache.get(key) is None
    assert cache_key(a=1, b=[1, 2]) == cache_key(b=[1, 2], a=1) != cache_key(a=1, b=[2, 1])


def test_fallbacks_are_counted(caplog):
    from ikatkit.llm.base import LLM

    llm = LLM("m")
    llm.count_fallback()
    llm.count_fallback()
    assert llm.stats["parse_fallbacks"] == 2 and "2 so far" in caplog.text


def test_prompts_render_every_task():
    for task in TASKS:
        messages = render(task, history=[("Hi", "Hello")], utterance="u?", query="q?", ptkb=["I am tall."],
                          all_ptkb=[("1", "I am tall.")], passages=["p one", "p two"], answer="a", n=3, response="r")
        assert messages[-1]["role"] == "user" and not any("{" in m["content"] for m in messages)
    rewrite = render("rtg_rewrite", history=[("Hi", "Hello")], utterance="u?")[0]["content"]
    assert "### Conversational Context:\nUser: Hi\nSystem: Hello" in rewrite
    assert rewrite.endswith("### Rewritten User Question:")
    chat = render("rtg_rewrite_chat", history=[("Hi", "Hello")], utterance="u?")
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert chat[-1]["content"] == "### Conversational Context:\nUser: Hi\nSystem: Hello\n\n### User Question:\nu?"
    assert all("<<" not in m["content"] and m["content"] == m["content"].strip() for m in chat)
    respond = render("rtg_response_chat", query="q?", ptkb=["I am tall."], passages=["p one"])
    assert [m["role"] for m in respond] == ["system", "user"] and respond[1]["content"] == "q?"
    assert respond[0]["content"].endswith("### User Information:\n- I am tall.\n\n### Passages:\n[1] p one")


def test_parsers():
    assert parse_rewrite('Rewritten question: "Is the Mediterranean diet expensive?"\nmore') == \
        "Is the Mediterranean diet expensive?"
    assert parse_rewrite("Sure! Here is the rewritten question:\n'Is it cheap?'") == "Is it cheap?"
    assert parse_rewrite("### Rewritten User Question: Is it cheap?") == "Is it cheap?"
    assert parse_rewrite("  \n") == "" and parse_rewrite("Here is the rewrite:") == ""
    assert parse_queries("1. vegan protein\n2) tofu protein\n- vegan protein\n* lentils", limit=5) == \
        ["vegan protein", "tofu protein", "lentils"]
    assert parse_queries("a\nb\nc\nd\ne\nf", limit=5) == ["a", "b", "c", "d", "e"]
    assert parse_queries("Here are the queries:\n1. -5 degrees in Oslo\n\n2. Oslo winter") == \
        ["-5 degrees in Oslo", "Oslo winter"]
    assert parse_ptkb_classification("Statements 2 and 10 are relevant.", ["1", "2", "10"]) == ["2", "10"]
    assert parse_ptkb_classification("none", ["1", "2"]) == []


@pytest.fixture(scope="module")
def llama_server():
    """A real llama.cpp server (llama-cpp-python) serving the bundled SmolLM2 GGUF on loopback."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed by `make setup-test`")
    with llama_cpp_server("bundled:smollm2", ready_timeout=90) as url:
        yield url


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
        body = {"error": {"message": "scripted", "type": "x"}} if status != 200 else completion("ok", 3, 1)
        send_json(self, body, status)

    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


def test_retries_and_clear_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server = HTTPServer(("127.0.0.1", 0), _Double)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        _Double.script = [429, 503]
        llm = make_llm({"backend": "openai", "model": "m", "base_url": base})  # the client retries both
        assert llm.chat([QUESTION]) == ["ok"] and _Double.script == []
        _Double.script = [401]
        with pytest.raises(IkatError, match="refused the API key"):
            llm.chat([[{"role": "user", "content": "other"}]])
        _Double.script = [404]
        with pytest.raises(IkatError, match="model 'm' not found"):
            llm.chat([[{"role": "user", "content": "third"}]])
        _Double.script = [500, 502, 503]
        stubborn = make_llm({"backend": "openai", "model": "m", "base_url": base, "max_retries": 2})
        with pytest.raises(IkatError, match="giving up after 3 attempts"):
            stubborn.chat([[{"role": "user", "content": "fourth"}]])
        _Double.script = [400]
        with pytest.raises(IkatError, match="rejected the request .HTTP 400"):
            stubborn.chat([[{"role": "user", "content": "fifth"}]])
        assert llm.stats["prompt_tokens"] == 3 and llm.stats["misses"] == 3
        cached = {"backend": "openai", "model": "m", "cache_dir": str(tmp_path)}
        assert make_llm({**cached, "base_url": base}).chat([QUESTION]) == ["ok"]
        other_server = make_llm({**cached, "base_url": base.replace("127.0.0.1", "localhost")})
        assert other_server.chat([QUESTION]) == ["ok"] and other_server.stats["misses"] == 1  # not the first's entry
    finally:
        server.shutdown()
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(IkatError, match="OPENAI_API_KEY is not set"):
        make_llm({"backend": "openai", "model": "gpt-4"})
