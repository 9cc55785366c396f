"""UniMS-RAG stages: source planning (threshold, llm, always), similarity tokens in the response prompt, evidence
self-refinement (Algorithm 1) with scripted doubles, config errors, and a real run with the bundled models."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ikatkit.errors import IkatError
from ikatkit.llm.base import LLM
from ikatkit.stages.evidence import RefineEvidence
from ikatkit.stages.plan import PlanSources, plan_summary
from ikatkit.pipelines.record import TurnRecord
from ikatkit.stages.core import Respond

PTKB = {"1": "I am vegetarian.", "2": "I live in Oslo.", "3": "I have two cats.", "4": "I run marathons."}
PASSAGES = {f"d:{i}": f"passage number {i} about tofu dishes" for i in range(6)}


class ScriptedLLM(LLM):
    """Unit-test double: answers each prompt with ``reply(prompt)`` and keeps the prompts it was given."""

    backend = "scripted"

    def __init__(self, reply: Any) -> None:
        super().__init__("scripted")
        self.reply, self.prompts = reply, []

    def _generate(self, batch: list[list[dict[str, str]]], params: dict[str, Any]) -> list[tuple[str, int, int]]:
        texts = [messages[0]["content"] for messages in batch]
        self.prompts.extend(texts)
        return [(self.reply(text), 1, 1) for text in texts]


class Texts:
    """Unit-test double of a searcher: passage texts by id."""

    def texts(self, ids: list[str]) -> dict[str, str]:
        return {pid: PASSAGES[pid] for pid in ids if pid in PASSAGES}


def turn(qid: str, ptkb_scores: list[float], passage_scores: list[float]) -> TurnRecord:
    """A record after rank_ptkb and rerank, with the given (descending) scores."""
    record = TurnRecord(qid, "What can I cook tonight?", [], dict(PTKB))
    record.query = record.utterance
    record.ptkb = [(key, s) for key, s in zip(PTKB, ptkb_scores)]
    record.ranking = [(pid, s) for pid, s in zip(PASSAGES, passage_scores)]
    return record


def threshold_plan(records: list[TurnRecord]) -> list[TurnRecord]:
    return PlanSources("threshold", ptkb_threshold=0.5, passage_threshold=0.3).transform(records)


def test_threshold_planner_on_known_scores():
    records = threshold_plan([turn("1-1_1", [0.62, 0.1], [0.7, 0.2]),   # both above
                              turn("1-1_2", [0.49, 0.3], [0.31]),       # PTKB just below
                              turn("1-1_3", [0.5], [0.29, 0.1]),        # PTKB at the threshold, passages below
                              turn("1-1_4", [0.2], [0.1])])             # neither: NULL
    assert [r.sources for r in records] == [["ptkb", "passages"], ["passages"], ["ptkb"], []]
    assert [r.plan["decision"] for r in records] == ["PTKB, PASSAGES", "PASSAGES", "PTKB", "NULL"]
    assert [(r.plan["ptkb_score"], r.plan["passage_score"]) for r in records] == [
        (0.62, 0.7), (0.49, 0.31), (0.5, 0.29), (0.2, 0.1)]
    # a PTKB-free turn's list is emptied (kept in the plan); the ranking stays for the run
    assert records[1].ptkb == [] and records[1].plan["ptkb"] == [["1", 0.49], ["2", 0.3]]
    assert records[0].ptkb == [("1", 0.62), ("2", 0.1)] and "ptkb" not in records[0].plan
    assert [len(r.ranking) for r in records] == [2, 1, 2, 1]
    assert plan_summary(records) == {"turns": 4, "planner": "threshold", "fallbacks": 0, "turns_with_ptkb": 2,
                                     "decisions": {"NULL": 1, "PASSAGES": 1, "PTKB": 1, "PTKB, PASSAGES": 1}}
    always = PlanSources("always").transform([turn("1-1_5", [0.1], [0.1])])[0]
    assert always.sources == ["ptkb", "passages"] and always.ptkb == [("1", 0.1)]


def test_record_round_trips_with_plan_and_evidence():
    record = threshold_plan([turn("1-1_2", [0.49, 0.3], [0.31])])[0]
    record.ptkb_used, record.evidence = ["2"], {"rounds": [{"removed": [["passages", "d:0"]]}], "llm_calls": 1}
    again = TurnRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record and again.to_json() == record.to_json() and again.uses("passages") and not again.uses("ptkb")


def test_response_prompt_omits_the_ptkb_when_the_plan_says_so():
    llm = ScriptedLLM(lambda prompt: "Try a tofu stir fry with vegetables.")
    records = threshold_plan([turn("1-1_1", [0.62, 0.55, 0.1], [0.6, 0.2, -0.2]),
                              turn("1-1_2", [0.49, 0.3], [0.6, 0.2])])
    Respond(Texts().texts, llm, ptkb=2, similarity_tokens=True).transform(records)
    with_ptkb, without = llm.prompts
    assert "I am vegetarian." in with_ptkb and "I live in Oslo." in with_ptkb and "I have two cats." not in with_ptkb
    assert not any(text in without for text in PTKB.values()) and "### User Information:\n(none)" in without
    assert records[0].ptkb_used == ["1", "2"] and records[1].ptkb_used == [] and records[1].used == list(PASSAGES)[:2]
    # similarity tokens: MiniLM cosines mapped by (s + 1) / 2 and rounded to one decimal
    assert "- (similarity 0.8) I am vegetarian.\n- (similarity 0.8) I live in Oslo." in with_ptkb  # 0.81, 0.775
    assert "[1] (similarity 0.8) passage number 0" in without and "[2] (similarity 0.6) passage number 1" in without
    assert "[3] (similarity 0.4) passage number 2" in with_ptkb
    # ... and the run's PTKB provenance is empty for the PTKB-free turn
    from ikatkit.pipelines.session import to_run

    run = to_run(records, "x", "automatic", 2023)
    assert [len(t.responses[0].ptkb) for t in run.turns] == [3, 0]
    plain = ScriptedLLM(lambda prompt: "Tofu.")
    Respond(Texts().texts, plain, ptkb=2).transform(threshold_plan([turn("1-1_1", [0.62, 0.55], [0.6])]))
    assert "similarity" not in plain.prompts[0] and "- I am vegetarian.\n- I live in Oslo." in plain.prompts[0]


def test_a_turn_planned_without_passages_gets_none_in_its_prompt():
    llm = ScriptedLLM(lambda prompt: "Hello there, happy to help.")
    record = threshold_plan([turn("1-1_3", [0.9], [0.1, 0.05])])[0]
    Respond(Texts().texts, llm).transform([record])
    assert record.used == [] and "### Passages:\n(none)" in llm.prompts[0] and "I am vegetarian." in llm.prompts[0]
    bad = ScriptedLLM(lambda prompt: "")  # a rejected output falls back to the top passage's text
    record = threshold_plan([turn("1-1_3", [0.9], [0.1, 0.05])])[0]
    Respond(Texts().texts, bad).transform([record])
    assert record.response == PASSAGES["d:0"] and record.notes == ["empty response: top passage used"]


def test_unparsable_llm_plan_is_a_counted_fallback():
    replies = {"1-1_1": "I think the user needs PTKB.", "1-1_2": "[SOURCE] NULL [EOS]", "1-1_3": "PASSAGES"}
    llm = ScriptedLLM(lambda prompt: next(v for k, v in replies.items() if f"Question:\nq{k}" in prompt))
    records = [turn(qid, [0.9, 0.1], [0.5]) for qid in replies]
    for record in records:
        record.utterance = f"q{record.qid}"
    PlanSources("llm", llm=llm).transform(records)
    assert [r.sources for r in records] == [["ptkb", "passages"], [], ["passages"]]
    assert [r.plan["fallback"] for r in records] == [True, False, False]
    assert records[0].rejected == {"plan_sources": replies["1-1_1"]}
    assert records[0].notes == ["unparsable source plan: every source used"] and not records[1].notes
    assert llm.stats["parse_fallbacks"] == 1 and plan_summary(records)["fallbacks"] == 1
    assert records[0].ptkb and records[1].ptkb == [] == records[2].ptkb
    assert "1. I am vegetarian." in llm.prompts[0] and llm.prompts[0].rstrip().endswith("### Sources:")


def evidence_record() -> TurnRecord:
    record = threshold_plan([turn("1-1_1", [0.8, 0.6, 0.2, 0.1], [0.9, 0.7, 0.5, 0.3, 0.1])])[0]
    record.ptkb_used, record.used = ["1", "2"], ["d:0", "d:1", "d:2"]
    record.passage_texts, record.response = Texts().texts(record.used), "first response"
    return record


def test_refinement_drops_the_rejected_item_and_regenerates_once():
    llm = ScriptedLLM(lambda prompt: "second response about tofu")
    stage = RefineEvidence(llm, Texts().texts, alpha=1, rounds=1)
    stage.consistency = lambda responses, texts, queries: [0.0 if t == PASSAGES["d:1"] else 0.9 for t in texts]
    record = stage.transform([evidence_record()])[0]
    assert len(llm.prompts) == 1 and record.response == "second response about tofu"
    assert record.used == ["d:0", "d:2", "d:3"] and record.ptkb_used == ["1", "2"]  # d:1 out, the next passage in
    assert PASSAGES["d:3"] in llm.prompts[0] and PASSAGES["d:1"] not in llm.prompts[0]
    assert "I am vegetarian." in llm.prompts[0] and record.passage_texts["d:3"] == PASSAGES["d:3"]
    (step,) = record.evidence["rounds"]
    assert step["removed"] == [["passages", "d:1"]] and step["added"] == [["passages", "d:3"]]
    assert [(i["id"], i["similarity"], i["score"]) for i in step["items"]] == [
        ("1", 0.9, 0.81), ("2", 0.8, 0.72), ("d:0", 0.95, 0.855), ("d:1", 0.85, 0.0), ("d:2", 0.75, 0.675)]
    assert record.evidence["llm_calls"] == 1 and record.evidence["initial_response"] == "first response"
    assert record.evidence["final"] == {"ptkb": ["1", "2"], "passages": ["d:0", "d:2", "d:3"]}


def test_refinement_replaces_a_statement_then_runs_out_of_novel_items():
    llm = ScriptedLLM(lambda prompt: f"response {len(llm.prompts)} here")
    stage = RefineEvidence(llm, Texts().texts, alpha=1, rounds=3)
    stage.consistency = lambda responses, texts, queries: [0.5 if t in PTKB.values() else 1.0 for t in texts]
    record = evidence_record()
    stage.transform([record])
    # the lowest statement goes each round (its next one comes in) until the PTKB ranking has no novel statement
    assert [s["removed"] for s in record.evidence["rounds"]] == [[["ptkb", "2"]], [["ptkb", "3"]], [["ptkb", "4"]]]
    assert [s["added"] for s in record.evidence["rounds"]] == [[["ptkb", "3"]], [["ptkb", "4"]], []]
    assert record.ptkb_used == ["1", "4"] and record.evidence["llm_calls"] == 2 == len(llm.prompts)
    assert record.evidence["stopped"] == "no novel evidence in round 3" and record.response == "response 2 here"
    rejected = ScriptedLLM(lambda prompt: "")
    stage = RefineEvidence(rejected, Texts().texts, rounds=2)
    stage.consistency = lambda responses, texts, queries: [0.5] * len(texts)
    record = stage.transform([evidence_record()])[0]  # a rejected regeneration keeps response and evidence
    assert record.response == "first response" and record.used == ["d:0", "d:1", "d:2"]
    assert record.ptkb_used == ["1", "2"] and record.evidence["stopped"] == "regenerated response rejected in round 1"


CONFIG = "configs/rtg_unims.toml"


@pytest.mark.parametrize(("old", "new", "where", "message"), [
    ('planner = "threshold"', 'planner = "oracle"', "stages[4].planner", "unknown planner 'oracle'"),
    ('planner = "threshold"', 'planner = "always"', "stages[4].ptkb_threshold", "only read by the threshold"),
    ("alpha = 1 ", "alpha = 0 ", "stages[6].alpha", "alpha = 0 must be an integer >= 1"),
    ('consistency = "embedding"', 'consistency = "nli"', "stages[6].consistency", "unknown consistency scorer"),
    ("rounds = 1 ", "rounds = -1 ", "stages[6].rounds", "rounds = -1 must be an integer >= 0"),
    ('passage_similarity = "cosine"\n\n', 'passage_similarity = "bm25"\n\n', "stages[5].passage_similarity",
     "unknown similarity mapping"),
])
def test_bad_options_name_the_config_line(tmp_path, old, new, where, message):
    from ikatkit.pipelines.config import load_config

    text = open(CONFIG, encoding="utf-8").read()
    assert [s["stage"] for s in load_config(CONFIG).stages][4:] == ["plan_sources", "respond", "refine_evidence"]
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    key = where.rsplit(".", 1)[1]
    index = int(where[7])
    starts = [n for n, t in enumerate(path.read_text().splitlines(), 1) if t.startswith("[[stages]]")]
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if n > starts[index] and t.startswith(key))
    with pytest.raises(IkatError) as err:
        load_config(path)
    assert f"{where}, line {line}" in str(err.value) and message in str(err.value) and str(path) in str(err.value)


def test_gpt_variant_loads():
    from ikatkit.pipelines.config import load_config

    stages = load_config("configs/rtg_unims_gpt.toml").stages
    assert stages[4] == {"stage": "plan_sources", "planner": "llm"}
    assert stages[5]["passage_similarity"] == "sigmoid" and stages[6]["rounds"] == 2


# -- a real run: bundled SmolLM2 + MiniLM over real 2023 turns and the 894-passage index ----------------------

E2E = """name = "unims-e2e"
batch_size = 2
threads = 1

[resources.llm]
kind = "llm"
backend = "transformers"
model = "bundled:smollm2"
max_new_tokens = 8

[resources.minilm]
kind = "bi-encoder"
model = "bundled:minilm"

[resources.bm25]
kind = "bm25"

[[stages]]
stage = "raw_query"

[[stages]]
stage = "rank_ptkb"
k = 20

[[stages]]
stage = "retrieve"
k = 20
expand_ptkb = false

[[stages]]
stage = "rerank"

[[stages]]
stage = "plan_sources"
planner = "threshold"
ptkb_threshold = THRESHOLD

[[stages]]
stage = "respond"
passages = 2
ptkb = 2
similarity_tokens = true

[[stages]]
stage = "refine_evidence"
rounds = 1
"""


def test_real_run_plans_and_refines(ikat2023, passages_index, tmp_path):
    from ikatkit.evaluate.responses import Embedder
    from ikatkit.pipelines import run_pipeline

    conversation = next(c for c in json.loads((ikat2023 / "test_topics.json").read_text()) if c["number"] == "9-1")
    conversation["turns"] = conversation["turns"][3:5]  # best MiniLM statement scores 0.29 and 0.39: one of each plan
    (tmp_path / "topics.json").write_text(json.dumps([conversation]), encoding="utf-8")
    (tmp_path / "config.toml").write_text(E2E.replace("THRESHOLD", "0.33"), encoding="utf-8")
    out = run_pipeline(tmp_path / "config.toml", tmp_path / "topics.json", tmp_path / "run", index=passages_index,
                       cache_dir=tmp_path / "cache")
    assert out.valid and len(out.records) == 2
    planned = [("ptkb" in r.sources) for r in out.records]
    assert planned == [r.plan["ptkb_score"] >= 0.33 for r in out.records] == [False, True]
    embedder = Embedder("bundled:minilm")
    for record, result in zip(out.records, out.run.turns):
        assert (len(result.responses[0].ptkb) > 0) == ("ptkb" in record.sources)
        assert len(record.ptkb_used) == (2 if "ptkb" in record.sources else 0) and record.response.strip()
        (step,) = record.evidence["rounds"]
        texts = [record.ptkb_all[i["id"]] if i["source"] == "ptkb" else record.passage_texts[i["id"]]
                 for i in step["items"]]
        expected = [(c + 1) / 2 for c in embedder.similarity([record.evidence["initial_response"]] * len(texts), texts)]
        assert [i["consistency"] for i in step["items"]] == pytest.approx(expected, abs=1e-5)
        lowest = min(step["items"], key=lambda i: i["score"])
        assert step["removed"] == [[lowest["source"], lowest["id"]]]
        kept = [["ptkb", k] for k in record.ptkb_used] + [["passages", p] for p in record.used]
        if step["response"] is None:  # the guards rejected the regeneration (9-1_5: '### Response:', a heading
            assert step["rejected"] and [lowest["source"], lowest["id"]] in kept  # only): the evidence stays
        else:
            assert [lowest["source"], lowest["id"]] not in kept
    manifest = json.loads(out.manifest_file.read_text())
    assert manifest["plan"]["turns"] == 2 and manifest["plan"]["turns_with_ptkb"] == sum(planned)
    assert manifest["evidence_refinement"]["llm_calls"] == sum(r.evidence["llm_calls"] for r in out.records)


@pytest.mark.parametrize(("output", "sources"), [
    ("[SOURCE] PTKB, PASSAGES [EOS]", ["ptkb", "passages"]), ("[SOURCE] null [EOS]", []), ("PTKB", ["ptkb"]),
    ("\n  [SOURCE] PASSAGES\nmore text", ["passages"]), ("[SOURCE] PASSAGES, PTKB [EOS]", None),
    ("PTKB and passages", None), ("The user needs: PTKB", None), ("", None), ("[SOURCE] [EOS]", None),
])
def test_plan_parser_is_strict(output, sources):
    from ikatkit.llm.parse import parse_sources

    assert parse_sources(output) == sources


def test_llm_judge_consistency_reuses_the_response_evaluation_judge():
    labels = {PASSAGES["d:0"]: "support", PASSAGES["d:1"]: "I cannot tell", PASSAGES["d:2"]: "partial_support"}
    llm = ScriptedLLM(lambda prompt: next((v for k, v in labels.items() if f"### Nugget:\n{k}" in prompt),
                                          "not_support"))
    stage = RefineEvidence(llm, Texts().texts, consistency="llm", rounds=0)
    record = evidence_record()
    values = stage.consistency([record.response] * 3, [PASSAGES[p] for p in record.used], [record.query] * 3)
    assert values == [1.0, 0.0, 0.5] and llm.stats["parse_fallbacks"] == 1  # unparsable: not_support, counted
    assert "### Question:\nWhat can I cook tonight?" in llm.prompts[0]
    assert "### Response:\nfirst response" in llm.prompts[0]
    assert stage.transform([record])[0].evidence["stopped"] == "0 rounds done" and record.response == "first response"
