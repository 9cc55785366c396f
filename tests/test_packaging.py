"""The package as users install it: a built wheel (not the source tree) validates and converts runs, with the
official formats it ships inside itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_packaged_templates_equal_the_top_level_ones():
    """``submission_templates/`` (for people to read) and the package's copy (what the code reads) are the same."""
    packaged = Path(str(resources.files("ikatkit") / "submission_templates"))
    top = ROOT / "submission_templates"
    names = sorted(p.name for p in top.iterdir())
    assert names == ["2023.json", "2024.json", "2025.jsonl"]
    assert sorted(p.name for p in packaged.iterdir() if p.is_file()) == names
    for name in names:
        assert (packaged / name).read_bytes() == (top / name).read_bytes(), f"{name} differs: copy it over"


@pytest.mark.slow
def test_built_wheel_validates_and_converts_in_a_fresh_venv(tmp_path):
    """Build the wheel from a copy of the project, install it (no dependencies) into a new venv that borrows
    this venv's installed dependencies through a .pth file, and run the installed ``ikatkit`` outside the repo."""
    from ikatkit.runs.io import write_run
    from ikatkit.topics import load_topics
    from runs_gold import gold_run

    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):  # the rest of what the build reads
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(source)], check=True, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("ikatkit-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, cwd=tmp_path)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IKATKIT_TEMPLATES")}
    work = tmp_path / "work"
    work.mkdir()
    where = subprocess.run([python, "-c", "import ikatkit; print(ikatkit.__file__)"], check=True, env=env, cwd=work,
                           capture_output=True, text=True).stdout.strip()
    assert Path(where).is_relative_to(site), where
    topics_file = Path(where).parent / "data" / "demo" / "topics.json"
    write_run(gold_run(load_topics(topics_file)), work / "gold.json", "2023")
    ikatkit = [str(venv / "bin" / "ikatkit")]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(ikatkit + list(args), env=env, cwd=work, capture_output=True, text=True)

    checked = run("validate", "gold.json", "--topics", str(topics_file))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    converted = run("convert", "gold.json", "--to", "2025", "--out", "gold.jsonl", "--topics", str(topics_file),
                    "--team-id", "uva")
    assert converted.returncode == 0, converted.stdout + converted.stderr
    lines = [json.loads(line) for line in (work / "gold.jsonl").read_text().splitlines()]
    assert len(lines) == len(load_topics(topics_file)) and lines[0]["metadata"]["team_id"] == "uva"
    assert run("validate", "gold.jsonl", "--topics", str(topics_file)).returncode == 0


def test_run_cache_option_holds_the_java_helpers(passages_index, ikat2023, tmp_path):
    """``ikatkit run --cache DIR`` compiles the Java helpers into DIR (as $IKATKIT_CACHE would), not ./.cache."""
    config = tmp_path / "bm25.toml"
    config.write_text('name = "bm25"\n[resources.bm25]\nkind = "bm25"\n[[stages]]\nstage = "raw_query"\n'
                      '[[stages]]\nstage = "retrieve"\nk = 10\nexpand_ptkb = false\n'
                      '[[stages]]\nstage = "respond"\ntask = "extractive"\n')
    env = {k: v for k, v in os.environ.items() if k != "IKATKIT_CACHE"}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run([sys.executable, "-m", "ikatkit.cli", "run", str(config), "--topics",
                           str(ikat2023 / "test_topics.json"), "--conversations", "9-1", "--index", str(passages_index),
                           "--out", "out", "--cache", "mine", "--no-validate"],
                          env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [p.name for p in (tmp_path / "mine" / "java").glob("*/ikatkit/TopHits.class")] == ["TopHits.class"]
    assert not (tmp_path / ".cache").exists()
