"""Processes (issue 14): Anserini's Java dies with a SIGKILLed parent; a closed pipe ends the CLI quietly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

HOLD_ANSERINI = """
import sys, time
from pathlib import Path
from ikatkit.index.anserini import Anserini
anserini = Anserini(Path(sys.argv[1]), Path(sys.argv[2]), threads=1, heap="256m")
print(anserini._process.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_anserini_java_dies_with_a_sigkilled_parent(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    os.mkfifo(shards / "shard-0.jsonl")  # never written: Java blocks on it, as it waits for segmenters
    parent = subprocess.Popen([sys.executable, "-c", HOLD_ANSERINI, str(shards), str(tmp_path / "index")],
                              stdout=subprocess.PIPE, text=True, env=ENV)
    java = int(parent.stdout.readline())
    try:
        time.sleep(2)
        assert _alive(java)  # blocked on the pipe, not finished
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 15
        while _alive(java) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(java), "Anserini's Java outlived its parent"
    finally:
        if _alive(java):
            os.kill(java, signal.SIGKILL)


def test_a_closed_pipe_ends_the_cli_quietly(passages_index, passages_jsonl):
    pid = json.loads(passages_jsonl.read_text(encoding="utf-8").splitlines()[0])["id"]
    reader = subprocess.Popen([sys.executable, "-m", "ikatkit.cli", "index", "get", str(passages_index), pid],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    reader.stdout.close()  # `| head` that has already left
    err = reader.stderr.read().decode()
    assert reader.wait() == 128 + signal.SIGPIPE
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
