"""LLM cache keys (issue 14): sampling parameters, the sample index and seed, and the adapter's content.

With a unit-test double; tests/test_llm.py samples the bundled SmolLM2 for real."""

from __future__ import annotations

from typing import Any

from ikatkit.llm.base import LLM, Messages

QUESTION = [{"role": "user", "content": "Name one city in France."}]


class Counting(LLM):
    """A unit-test double: each generation returns a new text, so a cache hit is visible."""

    backend = "counting"

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, **options)
        self.generated = 0

    def _generate(self, batch: list[Messages], params: dict[str, Any],
                  seeds: list[int] | None = None) -> list[tuple[str, int, int]]:
        self.generated += len(batch)
        return [(f"output {self.generated}", 1, 1) for _ in batch]


def test_greedy_keys_ignore_sampling_parameters_and_keep_old_entries(tmp_path):
    llm = Counting("m", cache_dir=str(tmp_path))
    key = llm._key(QUESTION, llm.params)
    for change in ({"top_p": 0.5}, {"top_k": 5}, {"seed": 7}):
        assert llm._key(QUESTION, {**llm.params, **change}) == key  # greedy: one output whatever they are
    assert llm._key(QUESTION, llm.params, 3) == key  # and whatever the sample index
    from ikatkit.llm.cache import cache_key

    before = cache_key(backend="counting", model="m", adapter=None, options={}, messages=QUESTION,
                       params={"max_new_tokens": 128, "temperature": 0.0})  # the key of earlier versions
    assert key == before


def test_sampled_keys_cover_top_p_seed_and_sample_index(tmp_path):
    llm = Counting("m", temperature=0.7, cache_dir=str(tmp_path))
    keys = {llm._key(QUESTION, {**llm.params, **change})
            for change in ({}, {"top_p": 0.5}, {"top_k": 5}, {"seed": 7}, {"temperature": 0.8})}
    keys.add(llm._key(QUESTION, llm.params, 1))
    assert len(keys) == 6
    assert llm.sample([QUESTION], 3) == [["output 3", "output 3", "output 3"]]  # one batch of 3 rows
    assert len(list(tmp_path.rglob("*.json"))) == 3  # n samples are n entries
    assert llm.sample([QUESTION], 3) == [["output 3", "output 3", "output 3"]] and llm.generated == 3


def test_adapter_keys_follow_its_content_not_its_path(tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"weights v1")
    first = Counting("m", adapter=str(adapter), cache_dir=str(tmp_path / "cache"))
    assert first.chat([QUESTION]) == ["output 1"]
    (adapter / "adapter_model.safetensors").write_bytes(b"weights v2")  # retrained into the same folder
    second = Counting("m", adapter=str(adapter), cache_dir=str(tmp_path / "cache"))
    assert second._key(QUESTION, second.params) != first._key(QUESTION, first.params)
    assert second.chat([QUESTION]) == ["output 1"] and second.stats["misses"] == 1  # generated anew
