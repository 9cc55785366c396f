"""Helpers of the stop tests (test_stop*.py): ``ikatkit`` as a subprocess in its own process group, as a
job-control shell starts a job (SIGINT is then not ignored), and a stop sent to the whole group."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
TOKEN = "local-test-token"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "IKAT_API_TOKEN": TOKEN}


def start(args: list[str], log: Path) -> subprocess.Popen:
    """``ikatkit ARGS`` in its own process group, stderr to ``log``."""
    return subprocess.Popen([sys.executable, "-m", "ikatkit.cli", *args], env=ENV, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=log.open("w"))


def stop_when(process: subprocess.Popen, ready: Callable[[], bool], signum: int, args: list[str], log: Path,
              said: str | None = None) -> None:
    """Send ``signum`` to the process's group once ``ready()``; assert a prompt exit with code 128 + signum and the
    resume line (or the line ``said`` after the signal's name)."""
    deadline = time.monotonic() + 180
    while not ready():
        assert process.poll() is None, f"ended before it could be stopped:\n{log.read_text()}"
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.01)
    os.killpg(process.pid, signum)  # the whole group, as a terminal sends Ctrl-C: workers and servers too
    sent = time.monotonic()
    code = process.wait(60)
    assert time.monotonic() - sent < 20
    again = shlex.join(["ikatkit", *args])
    last = log.read_text().splitlines()[-1]
    assert (code, last) == (128 + signum, f"ikatkit: stopped by {signal.Signals(signum).name}; "
                                          + (said or f"to resume, rerun: {again}"))
