"""Stopping (issue 37): SIGINT and SIGTERM to a real ``ikatkit run``, ``ikatkit interactive`` and ``ikatkit simulate``
subprocess mid-way end it within seconds with one resume line and exit code 130/143, leave no ``run.lock``, and the
resumed command writes what an uninterrupted one writes.

The subprocesses get their own process group (``start_new_session``), as a job-control shell gives a job: SIGINT
is then not ignored. The 2023 test topics (332 turns) over the 894 real passages keep a fast BM25 config busy long
enough to be stopped mid-way; each test checks that it was (some checkpoints or turns, not all).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ikatkit.cli import main
from ikatkit.llm.server import free_port

from bm25_config import BM25_EXTRACTIVE
from serving import wait_until_serving
from stops import ENV, TOKEN, start, stop_when

CONVERSATIONS = ["9-1", "9-2", "10-1", "10-2"]  # 2023 test conversations for the interactive runs


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("stop") / "bm25.toml"
    path.write_text(BM25_EXTRACTIVE.replace("batch_size = 4", "batch_size = 2"), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def uninterrupted(config, ikat2023, passages_index, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("stop") / "whole"
    assert main(["run", str(config), "--topics", str(ikat2023 / "test_topics.json"), "--index", str(passages_index),
                 "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_run_resumes_to_the_uninterrupted_files(signum, config, ikat2023, passages_index, uninterrupted,
                                                          tmp_path):
    out = tmp_path / "out"
    args = ["run", str(config), "--topics", str(ikat2023 / "test_topics.json"), "--index", str(passages_index),
            "--out", str(out), "--restart"]
    log = tmp_path / "stderr.txt"
    process = start(args, log)
    stop_when(process, lambda: (out / "checkpoints" / "batch-00000.json").exists(), signum,
              [a for a in args if a != "--restart"], log)
    batches = len(list((out / "checkpoints").glob("batch-*.json")))
    assert 0 < batches < 166  # stopped mid-way: 332 turns in batches of 2
    assert not (out / "run.lock").exists() and not list(out.glob("*.trec"))
    assert main(args[:-1]) == 0  # the resume line's command
    for name in ("bm25-extractive.json", "bm25-extractive.trec"):
        assert (out / name).read_bytes() == (uninterrupted / name).read_bytes()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["batches_run_now"] == 166 - batches  # no batch finished before the stop is run again


def answered(path: Path) -> list[tuple]:
    """The local dump's content apart from the run's own id: topic turn, utterance, response, citations."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(r["metadata"]["topic_id"], r["responses"][0]["user_utterance"], r["responses"][0]["assistant_text"],
             r["responses"][0]["assistant_citations"]) for r in rows]


def test_stopped_interactive_runs_resume_and_the_simulator_stops(config, ikat2023, passages_index, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("IKAT_API_TOKEN", TOKEN)
    port = free_port()
    server_args = ["simulate", "--topics", str(ikat2023 / "test_topics.json"), "--conversations", *CONVERSATIONS,
                   "--port", str(port), "--store", str(tmp_path / "store.json")]
    server_log = tmp_path / "simulate.txt"
    server = start(server_args, server_log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(server, url, 60, server_log.read_text)
        common = [str(config), "--api", url, "--index", str(passages_index)]
        assert main(["interactive", *common, "--run-id", "whole", "--out", str(tmp_path / "whole")]) == 0
        whole = answered(tmp_path / "whole" / "whole.jsonl")
        for signum in (signal.SIGINT, signal.SIGTERM):
            run_id = f"stopped-{signum}"
            out = tmp_path / run_id
            args = ["interactive", *common, "--run-id", run_id, "--out", str(out)]
            log = tmp_path / f"{run_id}.txt"
            stop_when(start(args, log), lambda out=out: len(list((out / "turns").glob("*/*.json"))) >= 3, signum, args,
                      log)
            assert 3 <= len(list((out / "turns").glob("*/*.json"))) < len(whole)  # stopped mid-way
            assert not (out / "run.lock").exists()
            assert main(args) == 0
            assert answered(out / f"{run_id}.jsonl") == whole
        stop_when(server, lambda: True, signal.SIGTERM, server_args, server_log)
        assert json.loads((tmp_path / "store.json").read_text())["runs"]  # what a restarted simulator reads
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


HANGING_CLEANUP = """
import time
from ikatkit.stopping import Stopped, handling_stops
with handling_stops():
    try:
        print("working", flush=True)
        time.sleep(60)
    except Stopped:
        print("cleaning up", flush=True)
        time.sleep(60)  # a cleanup that hangs
"""


def test_a_second_signal_ends_a_hanging_stop_at_once():
    process = subprocess.Popen([sys.executable, "-c", HANGING_CLEANUP], env=ENV, start_new_session=True,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "working\n"
    os.killpg(process.pid, signal.SIGINT)
    assert process.stdout.readline() == "cleaning up\n"
    os.killpg(process.pid, signal.SIGINT)
    assert process.wait(5) == -signal.SIGINT  # the default action: ended by the signal, as a shell reports 130


def test_a_simulator_without_a_store_says_nothing_resumes(ikat2023, tmp_path):
    port = free_port()
    args = ["simulate", "--topics", str(ikat2023 / "test_topics.json"), "--conversations", "9-1", "--port", str(port)]
    log = tmp_path / "simulate.txt"
    server = start(args, log)
    try:
        wait_until_serving(server, f"http://127.0.0.1:{port}", 60, log.read_text)
        stop_when(server, lambda: True, signal.SIGINT, args, log,
                  said="its runs lived in memory and are gone: nothing resumes (pass --store FILE to keep runs "
                       "across restarts)")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_a_stopped_dense_encode_resumes_with_the_shards_left(passages_jsonl, tmp_path):
    """Ray's workers get the terminal's SIGINT with the command: the finished shards are kept, the group ends, and
    the resume line's command encodes only the others."""
    lines = passages_jsonl.read_text(encoding="utf-8").splitlines(keepends=True)[:400]
    subset = tmp_path / "400.jsonl"  # 40 shards: a stop after the first lands while most are still to encode
    subset.write_text("".join(lines))
    out = tmp_path / "dense"
    args = ["index", "dense", str(subset), "--out", str(out), "--shard-size", "10", "--workers", "1"]
    log = tmp_path / "dense.txt"
    process = start(args, log)
    stop_when(process, lambda: any((out / "embeddings").glob("*.npy")), signal.SIGINT, args, log)
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "embeddings").glob("*.npy")}
    assert 0 < len(kept) < 40 and not (out / "manifest.json").exists()
    with pytest.raises(ProcessLookupError):  # nothing of the group runs on: Ray's workers stopped with it
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            os.killpg(process.pid, 0)
            time.sleep(0.2)
    assert main(args) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["counts"] == {"passages": len(lines), "shards": 40}
    assert {name: (out / "embeddings" / name).stat().st_mtime_ns for name in kept} == kept  # not encoded again


def test_a_stopped_llm_command_keeps_its_outputs_and_resumes(ikat2023, tmp_path, capsys):
    """persona-eval with the bundled SmolLM2 on a real llama.cpp server: the group's SIGINT leaves the LLM outputs
    cached so far, and the resume line's command takes them from the cache."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed by `make setup-test`")
    import re

    from ikatkit.llm.server import llama_cpp_server

    cache = tmp_path / "cache"
    with llama_cpp_server("bundled:smollm2", n_threads=1, ready_timeout=90) as url:
        config = tmp_path / "llm.toml"
        config.write_text(f'[llm]\nbackend = "openai"\nmodel = "smollm2"\nbase_url = "{url}"\n')
        args = ["persona-eval", "--topics", str(ikat2023 / "test_topics.json"), "--conversations", "9-1", "9-2",
                "10-1", "--llm-config", str(config), "--llm-only", "--max-new-tokens", "16", "--cache", str(cache)]
        log = tmp_path / "persona.txt"
        stop_when(start(args, log), lambda: any((cache / "llm").rglob("*.json")), signal.SIGINT, args, log)
        kept = len(list((cache / "llm").rglob("*.json")))
        assert main(args) == 0
    hits = re.search(r"llm smollm2: (\d+) utterances \((\d+) from the cache\)", capsys.readouterr().out)
    assert hits and 0 < kept == int(hits[2]) < int(hits[1])  # stopped mid-way, then only the rest asked
