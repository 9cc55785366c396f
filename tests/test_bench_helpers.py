"""The pure helpers of the benches: bench_scale's step-by-step merge of reports, robustness_llm's config with its
LLM served by llama.cpp and the search benches' interleaving of sides (each decides what a published figure was
measured with)."""

from __future__ import annotations

import math
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_interactive import with_threads  # noqa: E402
from bench_scale import disk_check, merge  # noqa: E402
from common import interleaved  # noqa: E402
from parallel_fit import amdahl, fit, power_law  # noqa: E402
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


def test_interleaved_rotates_the_sides_and_keeps_only_what_it_is_asked_to():
    """No side always follows the same one: the order turns by one from item to item and from round to round."""
    calls: list[tuple[str, int]] = []

    def side(name: str):
        return lambda item: calls.append((name, item)) or f"{name}{item}"

    best, kept = interleaved([0, 1, 2], {"a": side("a"), "b": side("b"), "c": side("c")}, rounds=2, keep={"b"})
    orders = ["".join(name for name, _ in calls[i:i + 3]) for i in range(0, len(calls), 3)]
    assert orders == ["abc", "bca", "cab", "bca", "cab", "abc"]  # round 0 items 0-2, then round 1 items 0-2
    assert [item for _, item in calls] == [0, 0, 0, 1, 1, 1, 2, 2, 2] * 2
    assert kept == {"b": ["b0", "b1", "b2"]}  # the last round's results of the kept side only
    assert set(best) == {"a", "b", "c"}


def test_interleaved_sums_each_items_fastest_round():
    import time

    rounds_seen = {"slow_once": 0}

    def slow_once(item: int) -> None:  # 0.1 s per item in the first round only
        rounds_seen["slow_once"] += 1
        if rounds_seen["slow_once"] <= 3:
            time.sleep(0.1)

    best, _ = interleaved([0, 1, 2], {"steady": lambda item: time.sleep(0.01), "slow_once": slow_once}, rounds=2)
    assert best["steady"] >= 0.03  # three items of at least 10 ms each
    assert best["slow_once"] < 0.1  # its second round (no sleep) is each item's fastest, not the first's 0.3 s


def test_the_interactive_bench_puts_its_bm25_threads_into_a_config():
    text = (ROOT / "configs" / "interactive_extractive.toml").read_text(encoding="utf-8")
    assert tomllib.loads(with_threads(text, 2))["resources"]["bm25"] == {"kind": "bm25", "threads": 2, "k1": 0.9,
                                                                         "b": 0.4}
    assert with_threads(text, 0) == text


def test_the_parallel_fit_recovers_a_power_law_and_amdahls_serial_fraction():
    a, b = power_law([1_000, 100_000], [2.0, 2.0 * 100 ** 0.5])  # ms = a * n ** 0.5: a = 2 / sqrt(1000)
    assert (round(a, 6), round(b, 6)) == (round(2 / 1000 ** 0.5, 6), 0.5)
    assert amdahl(0.2, 16) == 1 / (0.2 + 0.8 / 16)  # 4.0x: a fifth of the time stays on one thread
    found = fit({1_000: {"ms_1_thread": 2.0, "speedup_2": 2 / 1.5}, 1_000_000: {"ms_1_thread": 20.0, "speedup_2": 1.6}})
    assert [found["sizes"][n]["serial_fraction"] for n in (1_000, 1_000_000)] == [0.5, 0.25]  # 2 / speed-up - 1
    assert found["serial_fraction"]["exponent"] == round(math.log(0.5) / math.log(1000), 3)  # halved in 3 decades
    assert found["ms_1_thread"]["exponent"] == round(1 / 3, 3)


def test_the_interactive_bench_times_every_turn_of_a_replayed_conversation(ikat2023, passages_index, tmp_path,
                                                                          monkeypatch, capsys):
    """bench_interactive end to end on one 2023 conversation: a row of every turn's timings (it read the turns from
    the run's store; a store laid out anew broke it once, unseen)."""
    import json

    import bench_interactive
    from ikatkit.topics import load_topics

    first = load_topics(ikat2023 / "test_topics.json").conversations[0]
    monkeypatch.setenv("IKAT_API_TOKEN", "")  # restored after: the bench sets its own
    monkeypatch.setattr(sys, "argv", ["bench_interactive.py", "--configs", "bm25", "--conversations", "1", "--data",
                                      str(ikat2023), "--work", str(tmp_path), "--index", str(passages_index)])
    bench_interactive.main()
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (row["config"], row["conversations"], row["turns"]) == ("bm25", 1, len(first.turns))
    assert set(row["stages_p50"]) == {"raw_query", "retrieve", "respond"} and row["turn_p50"] > row["http_p50"] > 0
