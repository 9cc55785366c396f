"""Before a run loads anything: a model that is not on the machine, a GPU option on a CPU, an LLM server that does
not answer or dies: one line naming it, its config line and the fix, within seconds (issues #37, #43)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ikatkit.errors import IkatError
from ikatkit.llm.server import free_port
from ikatkit.pipelines.config import load_config
from ikatkit.pipelines.preflight import preflight

ROOT = Path(__file__).resolve().parents[1]


def online_env(tmp_path: Path) -> dict[str, str]:
    """This environment without the suite's HF_HUB_OFFLINE, with an empty Hugging Face cache and a hub endpoint
    that nothing answers (a closed loopback port): a machine without the models and without network, anywhere."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_CACHE=str(tmp_path / "hf-empty"),
               HF_ENDPOINT=f"http://127.0.0.1:{free_port()}")
    return env


def line_of(config: Path, text: str) -> int:
    """The 1-based line of ``config`` that holds ``text`` (read here, not by the code under test)."""
    return next(n for n, line in enumerate(config.read_text().splitlines(), 1) if text in line)


def test_run_with_hub_models_off_the_machine_fails_in_one_line(demo_dir, tmp_path):
    """`ikatkit run configs/manual.toml` without its hub models and without a hub: one line within 30 s naming each
    model with its config line and the fix; nothing is written, no traceback."""
    config = ROOT / "configs" / "manual.toml"
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ikatkit.cli", "run", str(config), "--topics",
                           str(demo_dir / "topics.json"), "--index", str(tmp_path / "index"), "--out",
                           str(tmp_path / "out")], env=online_env(tmp_path), cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    elapsed = time.monotonic() - start
    assert done.returncode == 2, done.stderr[-3000:]
    assert elapsed < 30, elapsed
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ikatkit: error: "), done.stderr[-3000:]
    for model in ("meta-llama/Llama-2-7b-chat-hf", "cross-encoder/ms-marco-MiniLM-L-12-v2"):
        assert f"'{model}' (resources." in lines[0] and f"`hf download {model}`" in lines[0]
        assert f"line {line_of(config, model)})" in lines[0]
    assert "does not answer" in lines[0] and "ikatkit configs" in lines[0]
    assert not (tmp_path / "out").exists()


def test_interactive_checks_first_with_hf_hub_offline(tmp_path):
    """HF_HUB_OFFLINE set: `ikatkit interactive` with a hub cross-encoder stops before contacting the API."""
    config = ROOT / "configs" / "interactive_rerank.toml"
    env = {**online_env(tmp_path), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "ikatkit.cli", "interactive", str(config), "--api",
                           f"http://127.0.0.1:{free_port()}", "--run-id", "r", "--out", str(tmp_path / "out")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    model = "cross-encoder/ms-marco-TinyBERT-L2-v2"
    assert f"HF_HUB_OFFLINE is set: '{model}' (resources.cross_encoder.model, line {line_of(config, model)})" \
        in done.stderr
    assert not (tmp_path / "out").exists()


def test_bundled_models_and_folders_pass(tmp_path):
    """The offline configs pass on the bundled models; a model folder passes, a missing path is named."""
    preflight(load_config(ROOT / "configs" / "manual_biencoder.toml"))
    folder = tmp_path / "my-model"
    folder.mkdir()
    config = tmp_path / "c.toml"
    body = ('name = "c"\n[resources.enc]\nkind = "bi-encoder"\nmodel = "{}"\n[resources.bm25]\nkind = "bm25"\n'
            '[[stages]]\nstage = "raw_query"\n[[stages]]\nstage = "retrieve"\n[[stages]]\nstage = "rerank"\n'
            '[[stages]]\nstage = "respond"\ntask = "extractive"\n')
    config.write_text(body.format(folder))
    preflight(load_config(config))
    config.write_text(body.format(tmp_path / "absent"))
    with pytest.raises(IkatError, match=r"no such file or folder: '.*absent' \(resources.enc.model, line 4\)"):
        preflight(load_config(config))


def _llm_config(tmp_path: Path, base_url: str) -> Path:
    config = tmp_path / "llm.toml"
    config.write_text(f'name = "c"\n[resources.llm]\nkind = "llm"\nbackend = "openai"\nmodel = "m"\n'
                      f'base_url = "{base_url}"\n[[stages]]\nstage = "rewrite"\n')
    return config


def test_an_llm_server_that_does_not_answer_is_named(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(IkatError, match=rf"the LLM server {url} \(resources.llm.base_url, line 6\) does not answer"):
        preflight(load_config(_llm_config(tmp_path, url)))


# A real server process on loopback that answers /v1/models and exits (code 3) on the first completion, as a
# llama.cpp built for another CPU does on a general protection fault.
DIES_ON_COMPLETION = """
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def do_POST(self):
        print("crashing on the first completion", file=sys.stderr, flush=True); os._exit(3)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_a_loopback_server_must_complete_one_tiny_request(tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", DIES_ON_COMPLETION, str(port)], stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/models", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        with pytest.raises(IkatError, match="answers /models but not one tiny completion"):
            preflight(load_config(_llm_config(tmp_path, url)))
        assert server.wait(timeout=10) == 3
    finally:
        server.kill()
        server.wait()


def test_a_killed_local_server_is_reported_with_its_exit_and_log(tmp_path, monkeypatch):
    """The llama.cpp server ikatkit started dies in the middle of a request: the client's error names the server's
    exit (SIGKILL) and the end of its log, not only connection errors."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed by `make setup-test`")
    from ikatkit.llm import make_llm
    from ikatkit.llm import server as local

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with local.llama_cpp_server("bundled:smollm2", n_threads=1, ready_timeout=90) as url:
        llm = make_llm({"backend": "openai", "model": "smollm2", "base_url": url, "max_new_tokens": 400,
                        "max_retries": 1})
        failure: list[BaseException] = []

        def ask() -> None:
            try:
                llm.chat([[{"role": "user", "content": "Tell a long story about a fox, in many sentences."}]])
            except BaseException as err:  # noqa: BLE001 - kept for the assertion below
                failure.append(err)

        asking = threading.Thread(target=ask)
        asking.start()
        time.sleep(1.5)  # the request is in flight (400 tokens take SmolLM2 several seconds on one thread)
        process = local._STARTED[url][0]  # the server this context started
        process.kill()
        asking.join(timeout=60)
    assert failure and isinstance(failure[0], IkatError), failure
    message = str(failure[0])
    assert "exited with code -9 (SIGKILL)" in message and "its log ends: " in message, message
