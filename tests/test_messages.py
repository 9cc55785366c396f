"""Two of issue #37's smaller messages: `simulate` on a port in use, and a run file cut short."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ikatkit.errors import IkatError
from ikatkit.runs.io import read_run, write_run

ROOT = Path(__file__).resolve().parents[1]


def test_simulate_on_a_port_in_use_says_so_in_one_line(demo_dir, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "ikatkit.cli", "simulate", "--topics",
                               str(demo_dir / "topics.json"), "--port", str(port), "--token", "t"],
                              env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"ikatkit: error: --port: cannot serve on 127.0.0.1:{port}: Address already in use — fix: pass another "
        f"--port, or stop what listens there (`ss -ltnp 'sport = :{port}'` names it; an earlier `ikatkit simulate`?)"]


@pytest.fixture
def gold(demo_dir):
    from ikatkit.topics import load_topics
    from runs_gold import gold_run

    return gold_run(load_topics(demo_dir / "topics.json"))


def test_a_truncated_json_run_is_called_truncated_with_its_line(gold, tmp_path):
    """A 2023 run (indented, as people reformat them) cut inside a passage id: the line where it stops."""
    whole = tmp_path / "whole.json"
    write_run(gold, whole, "2023")
    text = json.dumps(json.loads(whole.read_text()), indent=2)
    cut = text.index('"id": "clueweb', len(text) // 2) + 12  # inside the passage id's string
    path = tmp_path / "cut.json"
    path.write_text(text[:cut])
    line = text[:cut].count("\n") + 1
    expected = rf"\(line {line}, column \d+\): invalid JSON: the file looks truncated"
    with pytest.raises(IkatError, match=expected) as caught:
        read_run(path)
    assert "Unterminated" not in str(caught.value)
    path.write_text(text[:cut - 12])  # cut before the id: no string open, the file ends mid-object
    with pytest.raises(IkatError, match="the file looks truncated"):
        read_run(path)


def test_a_truncated_jsonl_run_names_its_last_line(gold, tmp_path):
    whole = tmp_path / "whole.jsonl"
    write_run(gold, whole, "2025")
    lines = whole.read_text().splitlines()
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines[:-1] + [lines[-1][: len(lines[-1]) // 2]]))
    expected = rf"\(line {len(lines)}\): invalid JSON: the file looks truncated, its last line"
    with pytest.raises(IkatError, match=expected):
        read_run(path)
    path.write_text("\n".join([lines[0], lines[1][:-1]] + lines[2:]) + "\n")  # broken, not the last line: no cut
    with pytest.raises(IkatError, match=r"\(line 2\): invalid JSON"):
        read_run(path)
