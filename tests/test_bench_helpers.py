"""The pure helpers of two benches: bench_scale's step-by-step merge of reports and robustness_llm's config with its
LLM served by llama.cpp (both decide what a published figure was measured with)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_scale import disk_check, merge  # noqa: E402
from robustness_llm import served  # noqa: E402


def test_a_rerun_replaces_only_the_steps_it_measured():
    first = {"build": {"ikatkit": {"seconds": 9.2}}, "search": {"k=100": {"ikatkit_q_per_s": 1.0, "same": True}}}
    rerun = {"build": {"ikatkit": {"seconds": 9.2}}, "search": {"k=100": {"ikatkit_q_per_s": 2.0}}}
    assert merge(first, rerun) == {"build": {"ikatkit": {"seconds": 9.2}},
                                   "search": {"k=100": {"ikatkit_q_per_s": 2.0, "same": True}}}
    assert merge({"commands": {"a": 1}}, {"search": {"b": 2}}) == {"commands": {"a": 1}, "search": {"b": 2}}


def test_the_disk_check_counts_what_a_size_already_has(tmp_path):
    (tmp_path / "r1000000").mkdir()
    with open(tmp_path / "r1000000" / "passages.jsonl", "wb") as handle:
        handle.truncate(2_000_000_000)  # sparse: 2 GB of size, no disk used
    assert disk_check(tmp_path, [1_000_000], anserini=False)["needed_gb"] == 1.9  # 3.9 KB a passage, less 2 GB
    (tmp_path / "r1000000" / "done.json").write_text("{}")
    assert disk_check(tmp_path, [1_000_000])["needed_gb"] == 0.0


def test_the_served_config_points_its_llm_at_the_server_and_keeps_the_rest():
    original = (ROOT / "configs" / "robustness_rewrite_bm25.toml").read_text(encoding="utf-8")
    config = tomllib.loads(served(original, "http://127.0.0.1:8712/v1", 64))
    before = tomllib.loads(original)
    assert config["resources"]["llm"] == {"kind": "llm", "backend": "openai", "model": "smollm2",
                                          "base_url": "http://127.0.0.1:8712/v1", "max_concurrency": 1,
                                          "max_new_tokens": 64, "timeout": 600.0}
    assert config["resources"]["bm25"] == before["resources"]["bm25"]
    assert config["stages"] == before["stages"] and config["name"] == before["name"]
