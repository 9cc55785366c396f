"""Stopping the commands that ask or train an LLM (issue 49), as real subprocesses in their own process group.

``eval-responses`` with the LLM nugget matcher and ``eval-dialogues`` with an LLM judge ask a real llama.cpp server
of the bundled SmolLM2 (greedy, so an output is the same from the server or the cache): the group's signal ends the
command within seconds with the resume line (130/143), the LLM outputs cached so far are kept, and the resume
line's command asks the server only for the rest and writes what an uninterrupted run writes. ``finetune train``
goes on from its last checkpoint to the adapter an uninterrupted training writes."""

from __future__ import annotations

import json
import signal
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import IKAT_DATA
from ikatkit.cli import main

from chat_double import send_json
from stops import start, stop_when

RUN = "infosense_llama_pssgqrs_wghtdrerank_1_run"  # a 2024 automatic run with short responses
TURNS = ["0_8"]  # a turn of it with its three gold nuggets: three (response, nugget) prompts, one batch
FORMS = IKAT_DATA / "2025-released" / "guidelines"
ASSESSMENTS = Path(__file__).parent / "data" / "nist-assessments" / "topic1-1.final"


ANSWERED: list[str] = []  # the requests the llama.cpp server has answered (through the relay), in order


class Relay(BaseHTTPRequestHandler):
    """Passes each request on to the llama.cpp server at ``upstream`` and counts its answers in ``ANSWERED``: the
    test sees how far the server had got when the command cached its first output."""

    upstream = ""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = urllib.request.Request(self.upstream + self.path, body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=600) as reply:
                status, data = reply.status, reply.read()
        except urllib.error.HTTPError as err:
            status, data = err.code, err.read()
        ANSWERED.append(self.path)
        send_json(self, data, status)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def llm_config(tmp_path_factory) -> Path:
    """A judge config of SmolLM2 on a llama.cpp server on loopback, asked through the counting relay."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed by `make setup-test`")
    from ikatkit.llm.server import llama_cpp_server

    with llama_cpp_server("bundled:smollm2", n_threads=1, ready_timeout=90) as url:
        Relay.upstream = url.removesuffix("/v1")
        relay = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
        threading.Thread(target=relay.serve_forever, daemon=True).start()
        path = tmp_path_factory.mktemp("llm") / "judge.toml"
        path.write_text(f'[llm]\nbackend = "openai"\nmodel = "smollm2"\n'
                        f'base_url = "http://127.0.0.1:{relay.server_address[1]}/v1"\n', encoding="utf-8")
        try:
            yield path
        finally:
            relay.shutdown()
            relay.server_close()


def outputs(cache: Path) -> dict[str, int]:
    """The cached LLM outputs: file -> modification time (a rewritten output would show)."""
    return {str(p.relative_to(cache)): p.stat().st_mtime_ns for p in (cache / "llm").rglob("*.json")}


def stopped_and_resumed(args: list[str], cache: Path, signum: int, log: Path, prompts: int) -> dict[str, int]:
    """Stop ``ikatkit ARGS`` (its ``--cache`` is ``cache``, its one batch ``prompts`` long) once it has cached an
    LLM output, while the server still had prompts of the batch to answer (an output is kept as soon as it comes,
    not when the batch is done); resume it in this process; the outputs kept before the stop."""
    before, answered = len(ANSWERED), []

    def first_output() -> bool:
        if not outputs(cache):
            return False
        answered.append(len(ANSWERED) - before)
        return True

    stop_when(start(args, log), first_output, signum, args, log)
    kept = outputs(cache)
    assert 0 < len(kept) < prompts and answered[0] < prompts  # stopped mid-way, mid-batch
    assert not list(log.parent.rglob("*.lock")) and not list(log.parent.rglob("*.tmp"))
    assert main(args) == 0  # the resume line's command
    return kept


def test_a_stopped_eval_responses_keeps_the_llm_labels_and_resumes(llm_config, nuggets_2024, tmp_path):
    responses = json.loads((nuggets_2024 / "automatic_responses.json").read_text(encoding="utf-8"))
    nuggets = json.loads((nuggets_2024 / "gold_nuggets_human.json").read_text(encoding="utf-8"))
    (tmp_path / "run.json").write_text(json.dumps({t: {RUN: responses[t][RUN]} for t in TURNS}), encoding="utf-8")
    (tmp_path / "nuggets.json").write_text(json.dumps({t: dict(list(nuggets[t].items())[:3]) for t in TURNS}),
                                           encoding="utf-8")

    def args(name: str) -> list[str]:
        return ["eval-responses", str(tmp_path / "run.json"), "--nuggets", str(tmp_path / "nuggets.json"),
                "--matcher", "llm", "--llm-config", str(llm_config), "--measures", "NuggetRecall", "--per-query",
                "--format", "json", "--cache", str(tmp_path / name / "cache"), "--out", str(tmp_path / name / "out")]

    assert main(args("whole")) == 0
    assert len(outputs(tmp_path / "whole" / "cache")) == 3
    kept = stopped_and_resumed(args("stopped"), tmp_path / "stopped" / "cache", signal.SIGINT,
                               tmp_path / "stopped.txt", 3)
    now = outputs(tmp_path / "stopped" / "cache")
    assert len(now) == 3 and {name: now[name] for name in kept} == kept  # only the rest asked, none again
    whole = json.loads((tmp_path / "whole" / "out").read_text())
    assert json.loads((tmp_path / "stopped" / "out").read_text()) == whole
    assert sorted(whole[RUN]["per_query"]) == TURNS


def test_a_stopped_eval_dialogues_keeps_the_judge_labels_and_resumes(llm_config, tmp_path):
    if not (FORMS / "ikat-dialog-v1.json").exists():
        pytest.skip(f"the 2025 release not found at {FORMS} (set IKAT_DATA)")

    def args(name: str) -> list[str]:  # a fragment's three questions: three prompts
        return ["eval-dialogues", str(ASSESSMENTS), "--forms", str(FORMS), "--level", "fragment", "--limit", "1",
                "--llm-config", str(llm_config), "--cache", str(tmp_path / name / "cache"), "--labels-out",
                str(tmp_path / name / "labels.jsonl"), "--bootstrap", "10", "--format", "json", "--out",
                str(tmp_path / name / "report.json")]

    assert main(args("whole")) == 0
    whole = json.loads((tmp_path / "whole" / "report.json").read_text())
    assert (whole["units"], whole["llm"]["misses"]) == (1, 3)
    kept = stopped_and_resumed(args("stopped"), tmp_path / "stopped" / "cache", signal.SIGTERM,
                               tmp_path / "stopped.txt", 3)
    report = json.loads((tmp_path / "stopped" / "report.json").read_text())
    assert (report["llm"]["hits"], report["llm"]["misses"]) == (len(kept), 3 - len(kept))  # only the rest asked
    assert len(outputs(tmp_path / "stopped" / "cache")) == 3
    assert {k: v for k, v in report.items() if k != "llm"} == {k: v for k, v in whole.items() if k != "llm"}
    assert (tmp_path / "stopped" / "labels.jsonl").read_text() == (tmp_path / "whole" / "labels.jsonl").read_text()



@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A two-layer Llama of random weights with SmolLM2's tokenizer and chat template: a real causal LM that
    trains in a fraction of a second per step (SmolLM2 itself takes a minute to load from its GGUF here)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from ikatkit.llm.hf import split_gguf

    folder = tmp_path_factory.mktemp("tiny-lm")
    path, gguf_file = split_gguf("bundled:smollm2")
    tokenizer = AutoTokenizer.from_pretrained(path, gguf_file=gguf_file)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                                 bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                 pad_token_id=tokenizer.pad_token_id)).save_pretrained(folder)
    return folder


def test_a_stopped_finetune_goes_on_from_its_checkpoint(ikat2023, tiny_model, tmp_path, capsys):
    """LoRA training on the 2023 training rewrites, a checkpoint every step: the group's SIGINT mid-way keeps the
    last checkpoint, and the resume line's command goes on from its step to the adapter (weights and losses) an
    uninterrupted training writes."""
    import torch

    from ikatkit.finetune.train import checkpoint_path

    def args(name: str) -> list[str]:
        return ["finetune", "train", "--topics", str(ikat2023 / "train_topics.json"), "--task", "rewrite", "--model",
                str(tiny_model), "--steps", "5", "--batch-size", "2", "--micro-batch", "2", "--lr", "2e-3", "--r",
                "8", "--max-length", "64", "--checkpoint-every", "1", "--out", str(tmp_path / name)]

    assert main(args("whole")) == 0
    whole = json.loads((tmp_path / "whole" / "training.json").read_text())
    assert (whole["resumed_from"], len(whole["losses"])) == (0, 5) and not checkpoint_path(tmp_path / "whole").exists()
    out, log = tmp_path / "stopped", tmp_path / "stopped.txt"
    saved = checkpoint_path(out)
    stop_when(start(args("stopped"), log), saved.exists, signal.SIGINT, args("stopped"), log)
    state = torch.load(saved, weights_only=True)
    assert 0 < state["step"] < 5 and not out.exists()  # stopped mid-way, no adapter yet
    assert not list(tmp_path.glob(".*.lock")) and not list(tmp_path.glob(".*.tmp"))
    other = args("stopped")
    other[other.index("--lr") + 1] = "1e-3"
    assert main(other) == 2 and saved.exists()  # a checkpoint of other settings is refused, and kept
    assert "the training checkpoint belongs to another settings" in capsys.readouterr().err
    assert main(args("stopped")) == 0  # the resume line's command
    resumed = json.loads((out / "training.json").read_text())
    assert resumed["resumed_from"] == state["step"] and resumed["losses"][:state["step"]] == state["losses"]
    assert resumed["losses"] == whole["losses"] and not saved.exists()
    name = "adapter_model.safetensors"
    assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
