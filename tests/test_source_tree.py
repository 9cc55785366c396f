"""ikatkit run from a source tree that was never installed (``PYTHONPATH=src``): no entry points, so no stages.

A real subprocess: the interpreter with ``-S`` (no site, so no editable finder and no ikatkit metadata), the
dependencies from a copy of site-packages' entries without ikatkit's, and a copy of ``src/ikatkit`` without the
``.egg-info`` an editable install leaves beside it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ikatkit"
DEMO = SRC / "data" / "demo"


@pytest.fixture(scope="module")
def source_tree(tmp_path_factory) -> dict[str, str]:
    """The environment of a `python -S -m ikatkit.cli` that sees the dependencies but no ikatkit install."""
    root = tmp_path_factory.mktemp("source")
    shutil.copytree(SRC, root / "src" / "ikatkit", ignore=shutil.ignore_patterns("__pycache__"))
    site = root / "site"
    site.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        name = entry.name.lower()
        if not (name.startswith(("ikatkit", "__editable__")) or name.endswith(".pth")):
            (site / entry.name).symlink_to(entry)
    return {**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{site}"}


def _ikatkit(env: dict[str, str], *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-S", "-m", "ikatkit.cli", *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_the_environment_sees_no_ikatkit_install(source_tree, tmp_path):
    probe = ("import importlib.metadata as m, ikatkit; print(ikatkit.__file__); "
             "print(sorted(p.name for p in m.entry_points(group='ikatkit.stages')))")
    done = subprocess.run([sys.executable, "-S", "-c", probe], env=source_tree, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    path, points = done.stdout.splitlines()
    assert not path.startswith(str(SRC)) and points == "[]"


def test_commands_that_run_no_stage_work_and_run_says_why_there_are_no_stages(source_tree, tmp_path):
    topics = _ikatkit(source_tree, "topics", DEMO / "topics.json", cwd=tmp_path)
    assert topics.returncode == 0, topics.stderr
    assert "Traceback" not in topics.stderr
    # a TREC run ranking each turn's judged passages by their grade: every measure is computable by hand below
    qrels = [line.split() for line in (DEMO / "qrels.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    turn, rows = qrels[0][0], [q for q in qrels if q[0] == qrels[0][0]]
    ranked = sorted(rows, key=lambda q: -int(q[3]))
    run = tmp_path / "run.trec"
    run.write_text("".join(f"{turn} Q0 {q[2]} {r} {len(ranked) - r} demo\n" for r, q in enumerate(ranked, 1)),
                   encoding="utf-8")
    done = _ikatkit(source_tree, "eval", run, "--qrels", DEMO / "qrels.txt", "--measures", "nDCG@1000",
                    "--per-query", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert any(line.split() == ["nDCG@1000", turn, "1.000000"] for line in done.stdout.splitlines()), done.stdout
    assert "Traceback" not in done.stderr
    helped = _ikatkit(source_tree, "run", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "`ikatkit stages` lists the stages" in " ".join(helped.stdout.split())

    refused = _ikatkit(source_tree, "run", SRC.parents[1] / "configs" / "demo.toml", "--topics",
                       DEMO / "topics.json", "--out", tmp_path / "out", cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    line, = refused.stderr.splitlines()
    assert "ikatkit's own stages are not registered" in line and "a source tree run without one" in line
    assert "commands that run no stage work without it" in line
