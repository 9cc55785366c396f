"""Agent-R (``refine_memory``): the boosting loop and the selector with a scripted LLM (a unit double), the selector
file, config errors, and a real train-then-run with the bundled SmolLM2 and MiniLM on real 2023 turns."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

from ikatkit.errors import IkatError
from ikatkit.llm.base import LLM
from ikatkit.stages.memory import FALLBACK, FEATURES, MemorySelector, RefineMemory
from ikatkit.pipelines.record import TurnRecord
from ikatkit.stages.core import Respond

QUERY = "where does the fox jump"
PASSAGES = {"d:0": "the red fox lives in the forest and hunts mice at night near the old farm",
            "d:1": "foxes sometimes jump over the river when the water is low in summer"}
REFERENCE = "the fox jumps over the river"
SECTION = re.compile(r"### Passages:\n(.*?)\n\n### User Question:", re.S)


def rouge_l(response: str, reference: str) -> float:
    """The reference package itself: rouge-score's ROUGE-L F1 with the Porter stemmer."""
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(reference, response)["rougeL"].fmeasure


class ScriptedLLM(LLM):
    """Unit-test double: memory prompts (ending "### Note:") answer from ``script[round]`` in order (the round from
    the seed the stage passes, seed·1000 + round); response prompts answer with the passages they were given."""

    backend = "scripted"

    def __init__(self, script: dict[int, list[str]]) -> None:
        super().__init__("scripted", temperature=0.7)
        self.script = {k: list(v) for k, v in script.items()}
        self.responses: list[str] = []

    def _generate(self, batch: list[list[dict[str, str]]], params: dict[str, Any],
                  seeds: list[int] | None = None) -> list[tuple[str, int, int]]:
        out = []
        for messages in batch:
            text = messages[0]["content"]
            if text.rstrip().endswith("### Note:"):
                assert QUERY in text and PASSAGES["d:0"] in text and PASSAGES["d:1"] in text
                out.append((self.script[params["seed"] % 1000].pop(0), 1, 1))
            else:
                given = " ".join(re.sub(r"^\[\d+\] ", "", p) for p in SECTION.search(text).group(1).split("\n\n"))
                self.responses.append(given)
                out.append((given, 1, 1))
        return out


class Texts:
    def texts(self, ids: list[str]) -> dict[str, str]:
        return {pid: PASSAGES[pid] for pid in ids if pid in PASSAGES}


@pytest.fixture(scope="module")
def embedder():
    from ikatkit.evaluate.responses import Embedder

    return Embedder("bundled:minilm")


def record() -> TurnRecord:
    r = TurnRecord("1-1_2", QUERY, [("I like foxes.", "Foxes live in many places.")], {"1": "I live in Oslo."})
    r.query, r.ranking = QUERY, [("d:0", 2.0), ("d:1", 1.0), ("d:9", 0.5)]
    return r


def stage(llm: LLM, embedder: Any, **options: Any) -> RefineMemory:
    refiner = RefineMemory(llm, Texts().texts, **{"k": 4, "passages": 2, **options})
    refiner._embedder = embedder
    return refiner


def respond_with(llm: LLM):  # the config's respond stage, as train_refiner passes it
    return Respond(Texts().texts, llm, passages=2).transform


RAW = " ".join(PASSAGES.values())
GOOD, BAD = "The fox jumps over the river.", "Cats sleep all day long."


def test_training_keeps_the_candidate_best_by_reference_and_counts_degenerate_ones(embedder):
    llm = ScriptedLLM({0: [BAD, GOOD, "", "User: where is the fox?"]})
    r = record()
    rows = stage(llm, embedder).train([r], {r.qid: REFERENCE}, respond_with(llm))
    trace = r.memory_trace
    assert [c["text"] for c in trace["candidates"]] == [BAD, GOOD, "", "User: where is the fox?"]
    assert [c["rejected"] for c in trace["candidates"]] == [None, None, "empty response",
                                                            "response echoes the prompt template"]
    assert trace["degenerate"] == 2 and trace["passages"] == ["d:0", "d:1"]
    assert trace["raw_response"] == RAW and trace["raw_delta"] == pytest.approx(rouge_l(RAW, REFERENCE), abs=1e-6)
    assert trace["chosen"] == 1 and r.memory == GOOD and trace["mode"] == "reference"
    assert llm.responses == [RAW, BAD, GOOD]  # respond answered from the passages, then from each usable memory
    raw = rouge_l(RAW, REFERENCE)
    assert trace["candidates"][1]["delta"] == pytest.approx(1.0) and trace["candidates"][0]["delta"] == 0.0
    assert trace["rewards"] == [pytest.approx(1.0 - raw, abs=1e-6)]
    assert [g for _, g in rows] == pytest.approx([-raw, 1.0 - raw]) and len(rows[0][0]) == len(FEATURES)
    assert not r.notes and llm.stats["parse_fallbacks"] == 0


def test_boosting_rounds_replace_the_memory_only_on_improvement(embedder):
    worse = "Mice live in the forest at night."
    llm = ScriptedLLM({0: [BAD, worse], 1: [GOOD, BAD]})
    r = record()
    rows = stage(llm, embedder, k=2, rounds=2).train([r], {r.qid: REFERENCE}, respond_with(llm))
    trace = r.memory_trace
    raw = rouge_l(RAW, REFERENCE)
    assert rouge_l(worse, REFERENCE) < raw  # round 0 finds nothing better than the passages: reward 0
    assert trace["rewards"] == [0.0, pytest.approx(1.0 - raw, abs=1e-6)]
    assert [c["round"] for c in trace["candidates"]] == [0, 0, 1, 1]
    assert trace["chosen"] == 2 and r.memory == GOOD and len(rows) == 4


def test_inference_picks_by_the_selector_without_the_reference(embedder):
    llm = ScriptedLLM({0: [BAD, "the fox does jump where it likes", "", GOOD]})
    weights = [0.0] * len(FEATURES)
    weights[FEATURES.index("query_coverage")] = 1.0  # gain = share of the query's tokens kept - 0.5
    refiner = stage(llm, embedder, selector="")
    refiner.selector = MemorySelector(weights, -0.5, [0.0] * len(FEATURES), [1.0] * len(FEATURES), "x")
    r = refiner.transform([record()])[0]
    trace = r.memory_trace
    # query tokens: where does the fox jump -> BAD keeps 0 of 5, the second all 5, GOOD 2 (the, fox)
    assert [c.get("predicted_gain") for c in trace["candidates"]] == [-0.5, 0.5, None, pytest.approx(-0.1)]
    assert trace["chosen"] == 1 and r.memory == "the fox does jump where it likes" and trace["mode"] == "selector"
    assert "response" not in trace["candidates"][1]  # nothing was generated to choose
    Respond(Texts().texts, llm, passages=2).transform([r])
    assert r.response == r.memory and r.used == ["d:0", "d:1"]  # the memory replaces the passages in the prompt

    refiner.min_gain = 0.6  # no candidate is predicted to gain that much: the passages stay
    llm.script[0] = [BAD, "the fox does jump where it likes", "", GOOD]
    r = refiner.transform([record()])[0]
    assert r.memory == "" and r.memory_trace["chosen"] is None and "0.6" in r.memory_trace["kept"]
    Respond(Texts().texts, llm, passages=2).transform([r])
    assert r.response == RAW


def test_degenerate_candidates_fall_back_to_the_passages_and_are_counted(embedder):
    outputs = ["", "User: where does it jump?", "The fox jumps high. The fox jumps high."]
    llm = ScriptedLLM({0: list(outputs)})
    refiner = stage(llm, embedder, k=3, selector="")
    refiner.selector = MemorySelector([1.0] * len(FEATURES), 0.0, [0.0] * len(FEATURES), [1.0] * len(FEATURES), "x")
    r = refiner.transform([record()])[0]
    assert r.memory == "" and r.memory_trace["degenerate"] == 3 and r.memory_trace["fallback"] == "no usable candidate"
    assert r.memory_trace["candidates"][2]["rejected"] == "response repeats a sentence"
    assert r.notes == [FALLBACK] and llm.stats["parse_fallbacks"] == 1
    llm.script[0] = list(outputs)
    t = record()
    assert stage(llm, embedder, k=3).train([t], {t.qid: REFERENCE}, respond_with(llm)) == []
    assert t.memory == "" and t.notes == [FALLBACK] and llm.stats["parse_fallbacks"] == 2
    empty = record()
    empty.ranking = []  # nothing retrieved: no LLM call, no fallback counted
    refiner.transform([empty])
    assert empty.memory_trace["fallback"] == "no retrieved passages" and not empty.memory_trace["candidates"]
    assert llm.stats["calls"] == 3 + 3 + 1 and llm.stats["parse_fallbacks"] == 2  # memories twice, one raw response


def test_selector_fit_is_the_closed_form_ridge_and_its_file_is_tied_to_the_stage(tmp_path, embedder):
    rng = np.random.default_rng(0)
    x = rng.random((40, len(FEATURES)))
    x[:, 0] = 0.5  # a constant feature: scale 1, weight 0
    gains = x @ np.arange(1, len(FEATURES) + 1) / 10 - 0.3 + rng.normal(0, 0.01, 40)
    selector = MemorySelector.fit(x, gains, "fp", ridge=1.0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - x.mean(axis=0)) / scale  # the normal equations of ridge on standardized features, centred gains
    weights = np.linalg.solve(z.T @ z + np.eye(z.shape[1]), z.T @ (gains - gains.mean()))
    assert selector.weights == pytest.approx(weights, abs=1e-7) and selector.weights[0] == 0
    assert selector.bias == pytest.approx(gains.mean(), abs=1e-7)
    assert selector.predict(x) == pytest.approx(z @ weights + gains.mean(), abs=1e-6)

    llm = ScriptedLLM({})
    refiner = stage(llm, embedder)
    path = tmp_path / "agent-r.json"
    MemorySelector.fit(x, gains, refiner.fingerprint()).save(path)
    loaded = stage(llm, embedder, selector=str(path)).selector
    assert loaded.predict(x) == pytest.approx(selector.predict(x), abs=1e-6)
    with pytest.raises(IkatError, match="trained for other candidate memories"):
        stage(llm, embedder, k=2, selector=str(path))
    other = ScriptedLLM({})
    other.model = "another-model"
    with pytest.raises(IkatError, match="trained for other candidate memories"):
        stage(other, embedder, selector=str(path))
    path.write_text("{}")
    with pytest.raises(IkatError, match="not a memory selector"):
        stage(llm, embedder, selector=str(path))
    with pytest.raises(IkatError, match="no memory selector here"):
        stage(llm, embedder, selector=str(tmp_path / "none.json"))
    with pytest.raises(IkatError, match=r"1 usable candidate\(s\) to learn from"):
        MemorySelector.fit(x[:1], gains[:1], "fp")


CONFIG = """name = "x"
[resources.llm]
kind = "llm"
model = "bundled:smollm2"

[resources.bm25]
kind = "bm25"

[[stages]]
stage = "raw_query"

[[stages]]
stage = "retrieve"

[[stages]]
stage = "refine_memory"
selector = "agent-r.json"
{option}

[[stages]]
stage = "respond"
"""


@pytest.mark.parametrize("option, message", [
    ("k = 0", r"stages\[2\]\.k, line 18\): k = 0 is below 1"),
    ("metric = \"BLEU\"", r"stages\[2\]\.metric, line 18\): metric 'BLEU' is not a reference measure"),
    ("min_gain = 2.0", r"stages\[2\]\.min_gain, line 18\): min_gain = 2.0 is outside"),
    ("k = 3\ntemperature = 0.0", r"stages\[2\]\.temperature, line 19\): k > 1 candidates need sampling"),
    ("selector = \"\"", r"stages\[2\]\.selector, line 17\): refine_memory needs selector"),
])
def test_bad_options_are_one_error_naming_the_line(tmp_path, option, message):
    from ikatkit.pipelines.config import load_config

    path = tmp_path / "x.toml"
    text = CONFIG.format(option=option)
    if option.startswith("selector"):
        text = text.replace('selector = "agent-r.json"\n', "")
    path.write_text(text)
    with pytest.raises(IkatError, match=message):
        load_config(path)


def test_memory_fields_round_trip():
    r = record()
    r.memory, r.memory_trace = GOOD, {"candidates": [{"text": GOOD, "rejected": None}], "chosen": 0}
    back = TurnRecord.from_json(json.loads(json.dumps(r.to_json())))
    assert back == r and back.memory == GOOD


# -- real: bundled SmolLM2 and MiniLM on two real 2023 train turns: train, then run the trained stage over them ------

REAL = """name = "agentr-e2e"
batch_size = 2

[resources.llm]
kind = "llm"
backend = "transformers"
model = "bundled:smollm2"
max_new_tokens = 8

[resources.bm25]
kind = "bm25"

[[stages]]
stage = "manual_query"

[[stages]]
stage = "retrieve"
k = 10
expand_ptkb = false

[[stages]]
stage = "refine_memory"
selector = "{selector}"
k = 2
passages = 1
max_new_tokens = 12
seed = 3
min_gain = -1.0

[[stages]]
stage = "respond"
passages = 1
"""


@pytest.mark.slow
def test_real_training_then_inference_with_the_bundled_models(ikat2023, passages_index, tmp_path):
    from ikatkit.training.refiner import train_refiner
    from ikatkit.pipelines import run_pipeline

    selector_file = tmp_path / "agent-r.json"
    config = tmp_path / "config.toml"
    config.write_text(REAL.format(selector=selector_file), encoding="utf-8")
    conversation = next(c for c in json.loads((ikat2023 / "train_topics.json").read_text()) if c["number"] == "1-1")
    conversation["turns"] = conversation["turns"][:2]
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps([conversation]), encoding="utf-8")
    selector = train_refiner(config, topics, selector_file, index=passages_index, cache_dir=tmp_path / "cache")
    assert selector.meta["turns"] == ["1-1_1", "1-1_2"]
    assert selector.meta["candidates"] == 4 - selector.meta["degenerate"]
    assert selector_file.exists() and len(selector.weights) == len(FEATURES)

    outcome = run_pipeline(config, topics, tmp_path / "run", index=passages_index, cache_dir=tmp_path / "cache")
    assert outcome.valid and [r.qid for r in outcome.records] == ["1-1_1", "1-1_2"]
    for r in outcome.records:
        trace = r.memory_trace
        assert trace["mode"] == "selector" and len(trace["candidates"]) == 2 and trace["passages"] == r.used
        usable = [c for c in trace["candidates"] if c["rejected"] is None]
        if usable:  # min_gain = -1: the best predicted candidate is always taken
            predicted = selector.predict(np.asarray([[c["features"][f] for f in FEATURES] for c in usable]))
            assert [c["predicted_gain"] for c in usable] == pytest.approx(list(predicted), abs=1e-5)
            best = max(usable, key=lambda c: c["predicted_gain"])
            assert r.memory == best["text"] and trace["candidates"][trace["chosen"]] is best
        else:
            assert r.memory == "" and FALLBACK in r.notes
        assert r.response.strip()
    # the seeded candidates at inference are those the training drew (replayed from the LLM cache)
    assert outcome.records and json.loads(outcome.manifest_file.read_text())["resource_stats"]["llm"]["misses"] == 0
