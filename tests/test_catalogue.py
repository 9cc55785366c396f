"""`ikatkit configs`: the shipped configs with what each needs, and `configs copy` (issue #37)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from ikatkit.catalogue import catalogue, copy_configs, shipped
from ikatkit.cli import main
from ikatkit.errors import IkatError

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_ships_configs_folder():
    assert {name: path.read_bytes() for name, path in shipped().items()} == {
        path.stem: path.read_bytes() for path in (ROOT / "configs").glob("*.toml")}


def test_offline_cpu_means_bundled_models_no_gpu_option_no_server():
    """Read from the files by hand: offline on a CPU iff every `model` is bundled:*, no `quantization`, no openai
    backend; hub models are the other `model` values."""
    for entry in catalogue():
        text = (ROOT / "configs" / entry.file).read_text()
        settings = "\n".join(line.split("#")[0] for line in text.splitlines())  # comments left out
        models = re.findall(r'^model = "([^"]+)"', settings, flags=re.M)
        served = {spec.get("model") for spec in tomllib.loads(text).get("resources", {}).values()
                  if spec.get("backend") == "openai"}  # a server's model name, not a hub id
        hub = [m for m in models if not m.startswith("bundled:") and m not in served]
        offline = not hub and "quantization" not in settings and 'backend = "openai"' not in settings
        assert entry.offline_cpu == offline, entry
        listed = next((n for n in entry.needs if n.startswith("hub models: ")), "hub models: ")
        assert sorted(listed.removeprefix("hub models: ").split(", ") if hub else []) == sorted(set(hub)), entry
        assert entry.description == tomllib.loads(text).get("description", "")
    offline = {e.file for e in catalogue() if e.offline_cpu}
    assert {"demo.toml", "manual_biencoder.toml", "interactive_extractive.toml"} <= offline
    assert not offline & {"manual.toml", "rtg_llama_zeroshot.toml", "gtr_gpt4.toml", "interactive_rerank.toml"}


def test_configs_command_lists_and_copies(tmp_path, capsys):
    assert main(["configs"]) == 0
    out = capsys.readouterr().out
    assert all(f"{name}.toml" in out for name in shipped())
    assert re.search(r"^manual_biencoder\.toml +offline, CPU ", out, flags=re.M)
    assert re.search(r"^manual\.toml +needs more .*\n +needs: GPU \(quantization = \"4bit\"\); hub models: "
                     r"meta-llama/Llama-2-7b-chat-hf", out, flags=re.M)
    assert main(["configs", "copy", "manual_biencoder", str(tmp_path / "mine")]) == 0
    copied = tmp_path / "mine" / "manual_biencoder.toml"
    assert copied.read_bytes() == (ROOT / "configs" / "manual_biencoder.toml").read_bytes()
    copy_configs(["manual_biencoder.toml"], tmp_path / "mine")  # the same file again: nothing to refuse
    copied.write_text("# mine\n")
    with pytest.raises(IkatError, match="a different file is already there"):
        copy_configs(["manual_biencoder"], tmp_path / "mine")
    assert main(["configs", "copy", "nope", str(tmp_path)]) == 2
    assert "no shipped config 'nope'" in capsys.readouterr().err


def test_a_config_whose_llm_needs_a_gpu_lists_it():
    """splade_rr_baseline's Llama 3.1 8B runs on a GPU (its comment, docs/sparse.md): `configs` says so, from the
    config's own device = "cuda" (as the preflight refuses it on a CPU), and the gpu extra."""
    entry = next(e for e in catalogue() if e.file == "splade_rr_baseline.toml")
    assert entry.needs[0] == 'GPU (device = "cuda")' and "gpu" in entry.extras and not entry.offline_cpu
    gpu = {e.file for e in catalogue() if any(n.startswith("GPU") for n in e.needs)}
    assert {"splade_rr_baseline.toml", "rtg_llama_zeroshot.toml"} <= gpu
