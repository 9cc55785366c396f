"""``--llm-config`` of ``ikatkit simulate --users llm`` and ``ikatkit eval-matcher --matcher llm``: an ikatkit LLM
backend, here a real llama.cpp server on loopback serving the bundled SmolLM2 GGUF, driven over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ikatkit.cli import main
from ikatkit.interactive.client import ApiClient
from ikatkit.llm.server import free_port, llama_cpp_server
from ikatkit.simulate.users import FAREWELL

from serving import wait_until_serving

SRC = Path(__file__).resolve().parents[1] / "src"
TOKEN = "local-test-token"


def test_the_users_llm_config_is_checked_before_serving(demo_dir, tmp_path, capsys):
    config = tmp_path / "users.toml"
    config.write_text('backend = "openai"\nmodel = "smollm2"\napi_key = "sk-in-a-file"\n', encoding="utf-8")
    code = main(["simulate", "--topics", str(demo_dir / "topics.json"), "--users", "llm", "--token", TOKEN,
                 "--llm-config", str(config)])
    assert code == 2 and "API keys are not read from configs" in capsys.readouterr().err


@pytest.fixture(scope="module")
def llm_url():
    """A real llama.cpp server (one thread) serving the bundled SmolLM2 GGUF on loopback."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed by `make setup-test`")
    with llama_cpp_server("bundled:smollm2", n_threads=1, ready_timeout=90) as url:
        yield url


def test_eval_matcher_llm_judge_through_a_llama_cpp_server(llm_url, nuggets_2024, tmp_path, capsys):
    labels = tmp_path / "labels.txt"  # four real dev labels of ksu-1 (mapped by name): two supported
    labels.write_text("16_1_7_1_ksu-1\t0\n16_1_7_2_ksu-1\t0\n88_0_2_5_ksu-1\t1\n88_0_2_6_ksu-1\t1\n")
    config = tmp_path / "judge.toml"
    config.write_text(f'backend = "openai"\nmodel = "smollm2"\nbase_url = "{llm_url}"\n', encoding="utf-8")
    code = main(["eval-matcher", str(labels), "--nuggets", str(nuggets_2024 / "gold_nuggets_human.json"),
                 "--responses", str(nuggets_2024 / "automatic_responses.json"), "--matcher", "llm",
                 "--llm-config", str(config), "--cache", str(tmp_path / "cache"), "--bootstrap", "10",
                 "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["pairs"] == 4 and out["tags"]["ksu-1"]["run"] == "ksu"
    assert out["llm"]["calls"] == 4 and out["llm"]["misses"] == 4  # one judge request per pair, none cached yet
    assert 0 <= out["llm"]["parse_fallbacks"] <= 4


def test_llm_users_talk_through_the_configured_llama_cpp_server(llm_url, demo_dir, tmp_path):
    config = tmp_path / "users.toml"
    config.write_text(f'[llm]\nbackend = "openai"\nmodel = "smollm2"\nbase_url = "{llm_url}"\n'
                      'max_new_tokens = 24\n', encoding="utf-8")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC), "IKAT_API_TOKEN": TOKEN}
    env.pop("OPENAI_API_KEY", None)  # a loopback server needs no key
    server = subprocess.Popen([sys.executable, "-m", "ikatkit.cli", "simulate", "--topics",
                               str(demo_dir / "topics.json"), "--conversations", "demo-1", "--users", "llm",
                               "--llm-config", str(config), "--max-turns", "1", "--port", str(port)],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(server, url, 60, lambda: server.stderr.read().decode())  # type: ignore[union-attr]
        client = ApiClient(url, TOKEN)
        first = client.start("cfg", "d", {})
        assert first["utterance"].strip() and not first["last_response_of_session"]
        last = client.continue_("cfg", "Lentils and tofu are good protein sources.", {}, {})
        assert last["utterance"] == FAREWELL and last["last_response_of_run"]  # --max-turns 1
        rows = client.dump("cfg")
        client.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    meta = rows[0]["responses"][0]["user_meta"]
    assert meta["rubric"] and "fallback" not in meta  # the first utterance came from the server's model
