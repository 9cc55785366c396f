"""ProMiSe self-refinement (``refine_response``): Algorithm 1's control flow with a scripted LLM whose outputs have
known proxy scores, sampling in the LLM layer, config errors, and a real end-to-end run with the bundled SmolLM2."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ikatkit.errors import IkatError
from ikatkit.evaluate.responses import rouge
from ikatkit.llm.base import LLM
from ikatkit.pipelines.record import TurnRecord
from ikatkit.stages.refine import RefineResponse, clean_output, majority

from chat_double import completion, send_json

PASSAGE = "the red fox jumps over the lazy dog near the river bank"
QUESTION = "where does the fox jump"
GOOD = PASSAGE                                   # all three metrics high: sufficient
MEDIUM = "the red fox jumps over the lazy dog"   # passages 8/12: below the 0.9 thresholds
HISTORY = QUESTION                               # best on rougeL_history only, worse on both passage metrics
BAD = "completely unrelated words here"          # 0 on every metric
THRESHOLDS = {"rouge1_recall_passages": {"threshold": 0.9}, "rougeL_passages": {"threshold": 0.9},
              "rougeL_history": {"threshold": 0.1}}
TAGS = {"specific": "specificity", "accurate": "faithfulness", "relevant": "relevance"}


class ScriptedLLM(LLM):
    """Unit-test double: ``script[(round, principle)]`` lists its outputs in order (round 0: the initial samples,
    principle None); the round comes from the seed the stage passes (seed·1000 + round)."""

    backend = "scripted"

    def __init__(self, script: dict[tuple[int, str | None], list[str]]) -> None:
        super().__init__("scripted", temperature=0.7)
        self.script = {k: list(v) for k, v in script.items()}
        self.prompts: list[tuple[int, str | None, str]] = []

    def _generate(self, batch: list[list[dict[str, str]]], params: dict[str, Any],
                  seeds: list[int] | None = None) -> list[tuple[str, int, int]]:
        assert seeds is not None and len(seeds) == len(batch)
        out = []
        for messages in batch:
            text = messages[0]["content"]
            round_ = params["seed"] % 1000
            principle = next((p for tag, p in TAGS.items() if f"more {tag}." in text), None) if round_ else None
            assert PASSAGE in text and QUESTION in text
            self.prompts.append((round_, principle, text))
            out.append((self.script[(round_, principle)].pop(0), 1, 1))
        return out


def record() -> TurnRecord:
    r = TurnRecord("1-1_2", QUESTION, [("I like foxes.", "Foxes live in many places.")], {"1": "I live in Oslo."})
    r.used, r.passage_texts, r.response = ["d:0"], {"d:0": PASSAGE}, "the plain response"
    return r


def refine(script: dict[tuple[int, str | None], list[str]], **options: Any) -> tuple[TurnRecord, ScriptedLLM]:
    llm = ScriptedLLM(script)
    stage = RefineResponse(llm, **{"n": 3, "iterations": 2, "metrics": THRESHOLDS, **options})
    return stage.transform([record()])[0], llm


def three(text: str) -> dict[tuple[int, str | None], list[str]]:
    return {(1, p): [text] for p in TAGS.values()} | {(2, p): [text] for p in TAGS.values()}


def test_scripted_texts_have_the_intended_scores():
    scores = RefineResponse(ScriptedLLM({}), metrics=THRESHOLDS).score(
        [GOOD, MEDIUM, HISTORY, BAD], [[PASSAGE]] * 4, ["I like foxes. " + QUESTION] * 4)
    assert [s["rouge1_recall_passages"] for s in scores] == [1.0, round(8 / 12, 6), round(3 / 12, 6), 0.0]
    good, medium, history, bad = scores
    assert good["rougeL_passages"] == 1.0 and 0 < history["rougeL_passages"] < medium["rougeL_passages"] < 0.9
    assert history["rougeL_history"] > good["rougeL_history"] >= 0.1 > bad["rougeL_history"] == 0
    assert history["rougeL_history"] > medium["rougeL_history"] >= 0.1
    # the same values as rouge-score through the response scorers (one ROUGE in the project)
    assert medium["rougeL_history"] == round(rouge([MEDIUM], ["I like foxes. " + QUESTION])["rougeL_f"][0], 6)


def test_sufficient_at_once():
    r, llm = refine({(0, None): [BAD, GOOD, MEDIUM]})
    t = r.refinement
    assert r.response == GOOD and t["stopped"] == "initial response sufficient" and t["iterations"] == 0
    assert t["initial"] == t["best"] == 1 and t["llm_calls"] == 3 and len(llm.prompts) == 3
    assert [c["sample"] for c in t["candidates"]] == [0, 1, 2] and t["plain"] == "the plain response"
    assert "Specific" in llm.prompts[0][2] and "Accurate" in llm.prompts[0][2]  # the prompt states the principles


def test_improves_on_iteration_two():
    script = {(0, None): [BAD, MEDIUM, BAD], (1, "specificity"): [BAD], (1, "faithfulness"): [BAD],
              (1, "relevance"): [BAD], (2, "specificity"): [MEDIUM], (2, "faithfulness"): [GOOD],
              (2, "relevance"): [BAD]}
    r, llm = refine(script)
    t = r.refinement
    assert r.response == GOOD and t["stopped"] == "sufficient at iteration 2" and t["iterations"] == 2
    assert t["initial"] == 1 and t["llm_calls"] == 3 + 3 + 3
    assert [(x["iteration"], x["decision"]) for x in t["rounds"]] == [(1, "not improved: best kept"),
                                                                     (2, "sufficient: accepted")]
    best = t["candidates"][t["best"]]
    assert (best["iteration"], best["principle"]) == (2, "faithfulness")
    # each round refines the current best: round 2's prompts still carry MEDIUM (round 1 was rejected)
    assert all(f"(not {tag}): {MEDIUM}\n" in text for _, _, text in llm.prompts[3:]
               for tag in TAGS if f"more {tag}." in text)


def test_never_improves_keeps_the_previous_best_and_counts_empty_outputs():
    script = {(0, None): [MEDIUM, BAD, ""], **three(BAD), (1, "relevance"): ["   "], (2, "relevance"): [""]}
    r, _ = refine(script)
    t = r.refinement
    assert r.response == MEDIUM and t["best"] == t["initial"] == 0 and t["stopped"] == "2 iterations done"
    assert t["empty_outputs"] == 3 and t["llm_calls"] == 9 and len(t["candidates"]) == 2 + 2 + 2
    assert [x["improvement"] for x in t["rounds"]] == [0.0, 0.0]
    assert "empty LLM output in refinement: dropped" in r.notes


def test_no_usable_candidate_keeps_the_respond_stage_response():
    r, _ = refine({(0, None): ["", " ", "Agent response 2 (more specific):"]})
    assert r.response == "the plain response" and r.refinement["empty_outputs"] == 3
    assert r.refinement["stopped"].startswith("no usable candidate")


@pytest.mark.parametrize("lam, expected", [(0.5, MEDIUM), (0.3, HISTORY)])
def test_lambda_gate(lam, expected):
    # HISTORY beats MEDIUM on one metric of three (weight 1/3): kept under λ = 0.5, accepted under λ = 0.3
    script = {(0, None): [MEDIUM, BAD, BAD], (1, "specificity"): [HISTORY], (1, "faithfulness"): [BAD],
              (1, "relevance"): [BAD]}
    r, _ = refine(script, iterations=1, improvement_threshold=lam)
    t = r.refinement
    assert r.response == expected and t["rounds"][0]["improvement"] == pytest.approx(1 / 3, abs=1e-6)


def test_weights_steer_the_gate():
    script = {(0, None): [MEDIUM, BAD, BAD], (1, "specificity"): [HISTORY], (1, "faithfulness"): [BAD],
              (1, "relevance"): [BAD]}
    weighted = {**THRESHOLDS, "rougeL_history": {"threshold": 0.1, "weight": 3.0}}  # 3 / (1 + 1 + 3) = 0.6
    r, _ = refine(script, iterations=1, metrics=weighted)
    assert r.response == HISTORY and r.refinement["rounds"][0]["improvement"] == 0.6


def test_majority_and_cleaning():
    scores = [{"a": 1, "b": 0, "c": 0}, {"a": 0, "b": 1, "c": 1}, {"a": 0, "b": 1, "c": 1}]
    assert majority(scores, ["a", "b", "c"]) == 1 and majority(scores, ["a"]) == 0
    assert clean_output("Agent response 2 (more specific): Fine text.\n###\nAgent response 1: x", 250) == "Fine text."
    assert clean_output("one two three", 2) == "one two"


@pytest.mark.parametrize("option, value, message", [
    ("n", 0, "needs at least one candidate"), ("iterations", -1, "negative"),
    ("improvement_threshold", 1.0, "outside"), ("principles", ["brevity"], "unknown principle"),
    ("metrics", {"bleu": {"threshold": 0.1}}, "unknown proxy metric"),
    ("metrics", {"rougeL_passages": {"threshold": 1.5}}, "outside \\[0.0, 1.0\\]"),
    ("metrics", {"rougeL_passages": {"threshold": 0.1, "weight": 0.0}}, "sum to 0"),
    ("metrics", {"rougeL_passages": {"threshold": "high"}}, "threshold 'high' of rougeL_passages is not a number"),
    ("metrics", {"rougeL_passages": {"threshold": 0.1, "weight": True}}, "weight True of .* is not a number"),
    ("metrics", {}, "at least one metric"), ("principles", [], "principles is empty"),
])
def test_bad_options(option, value, message):
    with pytest.raises(IkatError, match=message):
        RefineResponse(ScriptedLLM({}), **{option: value})


def test_bad_config_names_the_line(tmp_path):
    from ikatkit.pipelines.config import load_config

    text = open("configs/rtg_promise.toml", encoding="utf-8").read()
    assert load_config("configs/rtg_promise.toml").stages[-1]["n"] == 3
    path = tmp_path / "bad.toml"
    path.write_text(re.sub(r"rougeL_passages = \{ threshold = [0-9.]+", "rougeL_passages = { threshold = 2.0", text))
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if "threshold = 2.0" in t)
    with pytest.raises(IkatError) as err:
        load_config(path)
    assert f"stages[5].metrics.rougeL_passages.threshold, line {line}" in str(err.value)
    assert "outside [0.0, 1.0]" in str(err.value) and str(path) in str(err.value)
    path.write_text(text.replace("n = 3 ", "n = 0 "))
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if t.startswith("n = 0"))
    with pytest.raises(IkatError, match=f"stages\\[5\\].n, line {line}\\): n = 0"):
        load_config(path)


# -- sampling in the LLM layer --------------------------------------------------------------------------------

def test_sampling_cache_keys_cover_every_parameter():
    llm = LLM("m", temperature=0.7, top_k=50, seed=1)
    messages = [{"role": "user", "content": "hi"}]
    base = llm._key(messages, llm.params, 0)
    changed = [llm._key(messages, {**llm.params, k: v}, 0) for k, v in
               (("seed", 2), ("top_k", 40), ("top_p", 0.9), ("temperature", 0.8), ("max_new_tokens", 5))]
    assert len({base, llm._key(messages, llm.params, 1), *changed}) == 7
    greedy = {**llm.params, "temperature": 0.0}  # greedy output ignores the sampling parameters and the index
    assert llm._key(messages, greedy, 0) == llm._key(messages, {**greedy, "seed": 9, "top_k": 3}, 0)
    with pytest.raises(IkatError, match="temperature > 0 for n > 1"):
        LLM("m").sample([messages], 2)


def test_seeded_sampling_is_reproducible_per_candidate(smollm2_sampler, tmp_path):
    from ikatkit.llm import make_llm

    fruit = [{"role": "user", "content": "Name a fruit."}]
    city = [{"role": "user", "content": "Name a city."}]
    together = smollm2_sampler.sample([fruit, city], 3)
    assert len({*together[0]}) > 1  # sampled, not greedy
    assert smollm2_sampler.sample([city], 2) == [together[1][:2]]  # a candidate does not depend on its batch
    assert smollm2_sampler.stats["hits"] == 2  # ... and is replayed from the cache
    other_seed = smollm2_sampler.sample([fruit], 3, seed=8)
    assert other_seed != together[:1] and smollm2_sampler.stats["misses"] == 9
    fresh = make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 12,
                      "temperature": 0.7, "top_k": 50, "seed": 7, "cache_dir": str(tmp_path)})
    assert fresh.sample([city], 3) == [together[1]]  # the same seed without the cache: the same candidates


@pytest.fixture(scope="module")
def smollm2_sampler(tmp_path_factory):
    from ikatkit.llm import make_llm

    return make_llm({"backend": "transformers", "model": "bundled:smollm2", "max_new_tokens": 12,
                     "temperature": 0.7, "top_k": 50, "seed": 7,
                     "cache_dir": str(tmp_path_factory.mktemp("sampler") / "cache")})


def test_openai_backend_sends_one_seeded_request_per_candidate(monkeypatch, tmp_path):
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from ikatkit.llm import make_llm

    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):  # unit-test double: records requests, answers with their seed
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            send_json(self, completion(f"s{body['seed']}", 1, 1))

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = {"backend": "openai", "model": "m", "base_url": f"http://127.0.0.1:{server.server_port}/v1",
              "temperature": 0.7, "top_k": 50, "top_p": 0.9, "seed": 3, "cache_dir": str(tmp_path)}
    try:
        question = [{"role": "user", "content": "q"}]
        first = make_llm(config).sample([question], 3)[0]
        assert len(bodies) == 3 and len(set(first)) == 3
        assert all(b["top_k"] == 50 and b["top_p"] == 0.9 and b["temperature"] == 0.7 for b in bodies)
        again = make_llm(config)
        assert again.sample([question], 3)[0] == first and again.stats["hits"] == 3 and len(bodies) == 3
        assert make_llm({**config, "top_p": 0.8}).sample([question], 1)[0][0] != first[0] and len(bodies) == 4
    finally:
        server.shutdown()


# -- a real run: bundled SmolLM2 over real 2023 turns and the 894-passage index ------------------------------

E2E = """name = "promise-e2e"
batch_size = 3

[resources.llm]
kind = "llm"
backend = "transformers"
model = "bundled:smollm2"
max_new_tokens = 16

[resources.bm25]
kind = "bm25"

[[stages]]
stage = "raw_query"

[[stages]]
stage = "retrieve"
k = 20
expand_ptkb = false

[[stages]]
stage = "respond"
task = "extractive"
passages = 1

[[stages]]
stage = "refine_response"
n = 2
iterations = 1
seed = 5
[stages.metrics]
rouge1_recall_passages = { threshold = 0.9 }
rougeL_passages = { threshold = 0.3 }
rougeL_history = { threshold = 0.05 }
"""


@pytest.fixture(scope="module")
def e2e_inputs(ikat2023, passages_index, tmp_path_factory):
    """The config above and the first three turns of test conversation 9-1 as a topics file."""
    folder = tmp_path_factory.mktemp("promise")
    (folder / "config.toml").write_text(E2E, encoding="utf-8")
    conversation = next(c for c in json.loads((ikat2023 / "test_topics.json").read_text()) if c["number"] == "9-1")
    conversation["turns"] = conversation["turns"][:3]
    (folder / "topics.json").write_text(json.dumps([conversation]), encoding="utf-8")
    return folder / "config.toml", folder / "topics.json", passages_index


def test_real_run_is_deterministic_and_resumes_mid_refinement(e2e_inputs, tmp_path, monkeypatch):
    from ikatkit.pipelines import run_pipeline

    config, topics, index = e2e_inputs
    whole = run_pipeline(config, topics, tmp_path / "whole", index=index, cache_dir=tmp_path / "cache-a")
    assert whole.valid and len(whole.records) == 3
    stage = RefineResponse(None, n=2, iterations=1, metrics={"rouge1_recall_passages": {"threshold": 0.9},
                                                             "rougeL_passages": {"threshold": 0.3},
                                                             "rougeL_history": {"threshold": 0.05}})
    for r in whole.records:
        t = r.refinement
        assert r.response == t["candidates"][t["best"]]["text"] and r.response.strip()
        assert t["plain"] == " ".join(r.passage_texts[r.used[0]].split()[:250])  # the extractive response
        assert t["llm_calls"] == 2 + 3 * t["iterations"] and len(t["candidates"]) == t["llm_calls"] - t["empty_outputs"]
        passages = [r.passage_texts[p] for p in r.used]
        history = " ".join([u for u, _ in r.history] + [r.utterance])
        for candidate in t["candidates"]:  # the trace's scores are the proxy metrics of its texts
            assert candidate["scores"] == stage.score([candidate["text"]], [passages], [history])[0]
        initial = t["candidates"][t["initial"]]["scores"]
        assert (t["stopped"] == "initial response sufficient") == stage.sufficient(initial)
    summary = json.loads(whole.manifest_file.read_text())["refinement"]
    assert summary["turns"] == 3 and summary["llm_calls"] == sum(r.refinement["llm_calls"] for r in whole.records)
    assert summary["seconds"] > 0 and summary["turns_refined"] == sum(r.refinement["iterations"] > 0
                                                                      for r in whole.records)

    calls = {"n": 0}
    real_sample = LLM.sample

    def killed_in_round_one(self: LLM, batch: Any, n: int, **overrides: Any) -> Any:
        if overrides.get("seed") == 5001:  # the first refinement round: the initial samples are cached by now
            calls["n"] += 1
            raise KeyboardInterrupt
        return real_sample(self, batch, n, **overrides)

    monkeypatch.setattr(LLM, "sample", killed_in_round_one)
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(config, topics, tmp_path / "killed", index=index, cache_dir=tmp_path / "cache-b")
    monkeypatch.setattr(LLM, "sample", real_sample)
    assert calls["n"] == 1 and not list((tmp_path / "killed" / "checkpoints").glob("batch-*"))
    resumed = run_pipeline(config, topics, tmp_path / "killed", index=index, cache_dir=tmp_path / "cache-b")
    assert resumed.run_file.read_bytes() == whole.run_file.read_bytes()  # another cache, a kill: the same run
    assert [r.to_json() for r in resumed.records] == [r.to_json() for r in whole.records]
