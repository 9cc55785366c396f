"""Guards on LLM outputs: real degenerate outputs of the bundled SmolLM2-135M are detected, replaced by the
documented fallback, noted on the record and counted; the stages' fallbacks run under a scripted LLM."""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from ikatkit.llm.base import LLM
from ikatkit.llm.guards import (LUCENE_STOP_WORDS, check_queries, check_response, check_rewrite, cut_before_loop,
                                looping_phrase, normalize, repeated_sentence)
from ikatkit.pipelines.demo import demo_data
from ikatkit.pipelines.record import TurnRecord, records_for
from ikatkit.stages.core import GenerateAnswer, GenerateQueries, Respond, Rewrite
from ikatkit.topics import load_topics

from chat_double import completion, send_json

# Outputs SmolLM2-135M-Instruct (Q4_1, greedy) gave on the demo topics before the guards (issue 21).
COPIED_REWRITE = "User: How much protein do I need each day?"
LOOPING_RESPONSE = ("I'm glad to help! Here's a response that addresses your question. I'm glad to help! Here's a "
                    "response that addresses your question. I'm glad to help! Here's a response that addresses your "
                    "question.")
# Outputs of SmolLM2-135M with the demo config (configs/demo.toml, rtg_response_chat) on 2026-11-25 (issue 33).
HEADING_ONLY = "### How to Get Around Japan"  # demo-2_2
LIST_THEN_LOOP = ("Good sources for you include:\n\n- Ground flaxseed\n- Chia seeds, hemp seeds and walnuts\n- Fish\n"
                  "- Algae oil supplements" + "\n- Microplastics" * 8)  # demo-1_2
CUT_COPIES = {  # a sentence said again, the last copy cut short by max_new_tokens
    "demo-1_3": "The answer to your question is no. Tofu is a complete protein that provides all nine essential amino "
                "acids. It is a complete protein that is not found in any other animal source. It is also a complete "
                "protein that is not found in any other animal source. It is a complete protein that is not found in "
                "any",
    "demo-1_5": "It's not a bad idea to stop running, but it's also not a good idea to do it too early. If you're "
                "already feeling tired, it's better to stop running now. If you're feeling tired, it's better to stop "
                "running now. If you're feeling tired, it's better to stop",
    "demo-1_6": "The exercises mentioned above are designed to strengthen the gluteus medius, which is the key muscle "
                "that helps to support the hip and knee joint. These exercises are designed to improve the gluteus "
                "medius, which is the muscle that helps to support the hip joint. The exercises mentioned above are "
                "designed to"}
DEMO_PASSAGES = {"demo-1_2": ["clueweb22-en0000-00-00027:2", "clueweb22-en0000-00-00027:1",
                              "clueweb22-en0000-00-00046:2"],
                 "demo-1_3": ["clueweb22-en0000-00-00002:0", "clueweb22-en0000-00-00023:3",
                              "clueweb22-en0000-00-00002:1"],
                 "demo-1_5": ["clueweb22-en0000-00-00033:2", "clueweb22-en0000-00-00008:1",
                              "clueweb22-en0000-00-00037:1"]}  # the passages the demo gave the model
TEMPLATE_RESPONSE = ("### User Question:\nWhat are good sources for me?\n\n### Response:\nGood sources of protein "
                     "are beans.")


class ScriptedLLM(LLM):
    """A unit-test double: the real LLM base (cache, stats, fallback counts) with scripted outputs."""

    backend = "scripted"

    def __init__(self, outputs: list[str]) -> None:
        super().__init__("scripted")
        self.outputs = list(outputs)

    def _generate(self, batch: list[Any], params: dict[str, Any]) -> list[tuple[str, int, int]]:
        return [(self.outputs.pop(0), 0, 0) for _ in batch]


class Texts:
    """Stands in for the BM25 searcher's stored texts (``texts(ids)``)."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.known = texts

    def texts(self, ids: list[str]) -> dict[str, str]:
        return {pid: self.known[pid] for pid in ids if pid in self.known}


@pytest.fixture()
def records() -> list[TurnRecord]:
    """The six turns of demo conversation 1."""
    return records_for(load_topics(demo_data() / "topics.json").subset(["demo-1"]))


def test_rewrite_checks(records):
    second = records[1]
    assert check_rewrite(COPIED_REWRITE, second.utterance, second.history) == "rewrite carries role tags"
    copied = "How much protein do I need each day"
    assert check_rewrite(copied, second.utterance, second.history) == "rewrite copies an earlier utterance"
    assert check_rewrite(copied, records[0].utterance, records[0].history) is None  # turn 1 may keep its words
    assert check_rewrite("", second.utterance, second.history) == "empty rewrite"
    answered = "You need to eat 200g of protein every day."  # SmolLM2's "rewrite" of demo-1_4
    assert check_rewrite(answered, records[3].utterance, records[3].history) == "rewrite answers instead of asking"
    good = "What are good vegetarian protein sources without dairy?"
    assert check_rewrite(good, second.utterance, second.history) is None
    # SmolLM2 with the chat prompt (rtg_rewrite_chat) on demo-1_4 and demo-2_1: the question's subject lost
    assert check_rewrite("What should I do?", records[3].utterance, records[3].history) == \
        "rewrite only cuts the utterance"  # what, should, i, do: 4 of 9 words, none added
    assert check_rewrite("When is the best time to go there?", "When is the best time to go there? I'm thinking "
                         "about Japan.", []) == "rewrite only cuts the utterance"  # 4 of 9
    assert check_rewrite("What should I do about knee pain after my long runs?", records[3].utterance,
                         records[3].history) is None  # 8 of 9 kept, the context added
    assert check_rewrite("Is it vegan?", "Is it vegan?", []) is None  # the user's own words: nothing cut


def test_gold_rewrites_pass(topics):
    """The topics' own resolved utterances (2023 test: all but one that is a statement, not a question; demo: all)
    pass the rewrite checks."""
    failing = {}
    for record in records_for(topics):
        if not record.resolved_utterance:  # 12-1_12 has none
            continue
        problem = check_rewrite(record.resolved_utterance, record.utterance, record.history)
        if problem:
            failing[record.qid] = problem
    assert failing in ({}, {"13-1_2": "rewrite answers instead of asking"})


def test_rewrites_bm25_cannot_search(records):
    """Rewrites SmolLM2 gave with the context stage on the 2023 test year (10-3_6, 14-1_3, 17-3_3): stop words
    only, so BM25 retrieved nothing; rejected unless the user said just that."""
    second = records[1]
    looping = "No, no, no, no, no, no, no, no, no, no, no, no, no, no, no, no"
    assert check_rewrite(looping, second.utterance, second.history) == "rewrite has only stop words"
    assert check_rewrite("No.", "Yes.", []) == "rewrite has only stop words"
    assert check_rewrite("No.", "No.", []) is None  # the user's own words
    assert check_rewrite("protein protein protein", second.utterance, second.history) == "rewrite repeats one word"
    assert check_rewrite("Is it vegan?", "Is it vegan?", []) is None


def test_stop_words_are_lucenes():
    """The guard's stop words are the ones Anserini's English analyzer (our BM25's) drops."""
    pytest.importorskip("pyserini")
    from ikatkit.java import start_jvm

    start_jvm()
    from jnius import autoclass

    stop_set = autoclass("org.apache.lucene.analysis.en.EnglishAnalyzer").ENGLISH_STOP_WORDS_SET
    assert {"".join(word) for word in stop_set.toArray()} == LUCENE_STOP_WORDS  # char[] each


def test_response_and_query_checks():
    assert check_response(LOOPING_RESPONSE) == "response repeats a sentence"
    assert repeated_sentence(LOOPING_RESPONSE) == "i m glad to help"
    assert check_response(TEMPLATE_RESPONSE) == "response echoes the prompt template"
    assert check_response("Tofu has 8 g of protein per 100 g. Lentils have 9 g. Tofu is cheap.") is None
    assert check_response("Yes. Yes. It is fine.") is None  # short repeated words are no loop
    # SmolLM2 with the chat response prompt on demo-1_2: a list that loops on one item
    listed = ("Good sources for you include: - Ground flaxseed - Chia seeds, hemp seeds and walnuts - Fish - Algae oil "
              "supplements" + " - Microplastics" * 8)
    assert check_response(listed) == "response repeats a phrase" and looping_phrase(listed) == "microplastics"
    assert looping_phrase("very very very good, really really good") is None  # three times is no loop
    assert looping_phrase("a b a b a b a b") == "a b"
    assert check_response("### Protein sources\n- Tofu: 8 g per 100 g\n- Lentils: 9 g") is None  # own Markdown
    assert check_response("### Response:\nTofu and lentils.") is None  # the label the prompt ends on
    assert check_response("Sure.\nConversational Context: the user runs.") == "response echoes the prompt template"
    # a memory SmolLM2 wrote in the Agent-R run (2023 test): our "### Instruction:" label, plural
    assert check_response("### Instructions: 1. Read the question and the passages.") == \
        "response echoes the prompt template"
    assert check_queries(["tofu protein"], "tofu protein\nTofu protein!\n1. tofu protein") == \
        "generated queries are all duplicates"
    assert check_queries(["tofu protein", "lentil protein"], "tofu protein\nlentil protein") is None
    assert check_queries([], "") == "no generated query"


def test_rewrite_stage_falls_back_to_the_utterance(records):
    llm = ScriptedLLM(["How much protein does a vegetarian runner need?", COPIED_REWRITE, "",
                       "### Rewritten User Question:", "Should I stop running because of my knee pain?",
                       "Which exercises help knee pain?"])
    out = Rewrite(llm).transform(records)
    assert [r.query for r in out] == ["How much protein does a vegetarian runner need?", records[1].utterance,
                                      records[2].utterance, records[3].utterance,
                                      "Should I stop running because of my knee pain?",
                                      "Which exercises help knee pain?"]
    assert out[1].notes == ["rewrite carries role tags: raw utterance used"]
    assert out[1].rejected == {"rewrite": COPIED_REWRITE}
    assert out[2].notes == out[3].notes == ["empty rewrite: raw utterance used"]
    assert llm.stats["parse_fallbacks"] == 3 and not out[0].notes and not out[0].rejected


def test_respond_falls_back_to_the_top_passage(records):
    texts = {"p1": "Tofu gives about 8 grams of protein per 100 grams.", "p2": "Lentils are rich in protein."}
    for record in records[:3]:
        record.ranking = [("p1", 2.0), ("p2", 1.0)]
    llm = ScriptedLLM([LOOPING_RESPONSE, TEMPLATE_RESPONSE, "Tofu and lentils are good sources."])
    out = Respond(Texts(texts).texts, llm, passages=2).transform(records[:3])
    assert [r.response for r in out] == [texts["p1"], texts["p1"], "Tofu and lentils are good sources."]
    assert out[0].notes == ["response repeats a sentence: top passage used"]
    assert out[1].notes == ["response echoes the prompt template: top passage used"]
    assert out[0].rejected == {"respond": LOOPING_RESPONSE} and out[0].used == ["p1", "p2"]


def test_gtr_stages_fall_back(records):
    answer = ScriptedLLM([LOOPING_RESPONSE, "Eat tofu, lentils and beans."])
    out = GenerateAnswer(answer).transform(records[:2])
    assert out[0].initial_answer == "" and out[0].notes == ["response repeats a sentence: queries generated without "
                                                            "an answer"]
    assert out[1].initial_answer == "Eat tofu, lentils and beans."
    queries = ScriptedLLM(["tofu protein\ntofu protein.\nTofu Protein", "", "tofu protein\nlentil protein"])
    for record in records[:3]:
        record.query = f"rewrite of {record.qid}"
    out = GenerateQueries(queries, n=5).transform(records[:3])
    assert [r.queries for r in out] == [["rewrite of demo-1_1"], ["rewrite of demo-1_2"],
                                        ["tofu protein", "lentil protein"]]
    assert out[0].notes[-1] == "generated queries are all duplicates: the turn's query used"
    assert out[1].notes[-1] == "no generated query: the turn's query used"
    assert queries.stats["parse_fallbacks"] == 2


def test_stop_strings_cut_the_reply_before_a_guard_sees_it(records):
    """The prompts' stop strings end a reply where the model starts another section or turn."""
    from ikatkit.llm.base import cut_at_stop
    from ikatkit.llm.prompts import STOPS

    assert cut_at_stop("Beans.\nUser: more?", STOPS["rtg_response"]) == "Beans."
    assert cut_at_stop("### Response:\nBeans.", STOPS["rtg_response"]) == "### Response:\nBeans."
    record = records[0]
    record.ranking = [("p1", 1.0)]
    llm = ScriptedLLM(["Tofu and lentils give protein.\n\n### User Question:\nWhat are good sources for me?"])
    out = Respond(Texts({"p1": "Tofu."}).texts, llm).transform([record])
    assert out[0].response == "Tofu and lentils give protein." and not out[0].notes


def test_rejected_outputs_survive_checkpoints(records):
    record = records[1]
    record.rejected = {"rewrite": COPIED_REWRITE}
    assert TurnRecord.from_json(record.to_json()) == record


def test_gtr_queries_that_retrieve_nothing_fall_back(records, demo_index):
    """A generated query list whose queries all miss the index: the turn's own query is searched instead."""
    pytest.importorskip("pyserini")
    from ikatkit.stages.core import Fuse, Retrieve, candidate_key
    from ikatkit.retrieve.bm25 import Bm25Searcher

    searcher = Bm25Searcher(demo_index)
    first, second = records[0], records[1]
    for record in (first, second):
        record.query = record.utterance
    first.queries = ["zzyzx qwfp", "xkcdq"]  # no such terms in the demo collection
    second.queries = ["xkcdq", second.utterance]  # one query retrieves: no fallback
    out = Fuse().transform(Retrieve(searcher, k=10, expand_ptkb=False).transform([first, second]))
    own = [pid for pid, _ in searcher.search(first.utterance, 10)]
    assert own and list(out[0].candidates) == [candidate_key("searcher", first.utterance)]
    assert [pid for pid, _ in out[0].ranking] == own
    assert out[0].notes == ["generated queries retrieved nothing: the turn's query searched"]
    assert out[1].candidates[candidate_key("searcher", "xkcdq")] == [] and not out[1].notes
    assert [pid for pid, _ in out[1].ranking] == [pid for pid, _ in searcher.search(second.utterance, 10)]


def test_context_evaluation_counts_guarded_rewrites(demo_dir, demo_index):
    """`ikatkit context --llm`: each method's rejected rewrites are counted by reason (demo, scripted outputs)."""
    pytest.importorskip("pyserini")
    from ikatkit.studies.context import evaluate_context

    topics = load_topics(demo_dir / "topics.json")
    turns = [turn.qid for turn in topics]
    good = {turn.qid: turn.resolved_utterance for turn in topics}
    outputs = [COPIED_REWRITE if i % 3 == 0 else "" if i % 3 == 1 else good[qid] for i, qid in enumerate(turns)]
    llm = ScriptedLLM(outputs + [good[qid] for qid in turns])  # "all", then "last": every rewrite kept
    result = evaluate_context(topics, demo_index, demo_dir / "qrels.txt", methods=["last"], llm=llm)
    assert result.guarded == {"all": {"empty rewrite": 4, "rewrite carries role tags": 4}, "last": {}}
    assert "- all: 8; empty rewrite 4; rewrite carries role tags 4" in result.to_markdown()


def test_a_heading_alone_is_no_response():
    assert check_response(HEADING_ONLY) == "response is only a heading"
    assert check_response("## Getting around\n\n### By train") == "response is only a heading"
    assert check_response("### How to Get Around Japan\nThe JR Pass covers most trains.") is None
    assert check_response("#1 tip: take the train.") is None  # no Markdown heading ("#" then a space)


def test_a_sentence_said_again_with_its_last_copy_cut_short():
    """demo-1_3 and demo-1_5 passed the guards before (no sentence twice word for word); demo-1_6 too."""
    for qid, text in CUT_COPIES.items():
        assert check_response(text) == "response repeats a sentence", qid
    assert repeated_sentence(CUT_COPIES["demo-1_6"]) == normalize(CUT_COPIES["demo-1_6"].split(". ")[0])
    # the rules one by one: a cut last copy of five words or more; a long sentence with one word added
    assert repeated_sentence("Tofu is rich in protein and iron. Lentils are cheap. Tofu is rich in protein") == \
        "tofu is rich in protein and iron"
    assert repeated_sentence("Tofu is rich in protein and iron. Lentils are cheap. Tofu is rich") is None  # 3 words
    assert repeated_sentence("Tofu is rich in protein. Tofu is rich in protein and iron.") is None  # says more
    assert repeated_sentence("Tofu is a complete protein found in no other plant source. Tofu is also a complete "
                             "protein found in no other plant source.") is not None
    assert repeated_sentence("Tofu has 8 g of protein per 100 g here. Tempeh has 19 g of protein per 100 g here.") \
        is None  # two facts in one mould


def test_a_loop_is_cut_after_a_usable_answer(records, demo_index):
    """demo-1_2: the four-item list is kept, the "- Microplastics" loop cut (its whole output on the record); a loop
    after a preamble, a heading alone and an answer the passages do not support fall back to the top passage."""
    pytest.importorskip("pyserini")
    from ikatkit.retrieve.bm25 import Bm25Searcher

    searcher = Bm25Searcher(demo_index)
    four = "Good sources for you include:\n\n- Ground flaxseed\n- Chia seeds, hemp seeds and walnuts\n- Fish\n- " \
           "Algae oil supplements"
    passages = {qid: list(searcher.texts(ids).values()) for qid, ids in DEMO_PASSAGES.items()}
    assert cut_before_loop(LIST_THEN_LOOP, passages["demo-1_2"]) == four
    assert cut_before_loop(CUT_COPIES["demo-1_3"], passages["demo-1_3"]) == CUT_COPIES["demo-1_3"][:178]
    assert CUT_COPIES["demo-1_3"][:178].endswith("not found in any other animal source.")
    assert cut_before_loop(CUT_COPIES["demo-1_5"], passages["demo-1_5"]) is None  # 3 of its 17 words in them
    assert cut_before_loop(LIST_THEN_LOOP, passages["demo-1_5"]) is None  # the list is not from these passages
    for record in records[:3]:
        record.ranking = [(pid, 1.0 - i / 10) for i, pid in enumerate(DEMO_PASSAGES["demo-1_2"])]
    llm = ScriptedLLM([LIST_THEN_LOOP, LOOPING_RESPONSE, HEADING_ONLY])
    out = Respond(searcher.texts, llm).transform(records[:3])
    top = searcher.texts(DEMO_PASSAGES["demo-1_2"][:1])[DEMO_PASSAGES["demo-1_2"][0]]
    assert out[0].response == " ".join(four.split())  # responses are single-spaced
    assert out[0].notes == ["response repeats a phrase: cut before the loop"]
    assert out[0].rejected == {"respond": LIST_THEN_LOOP}
    assert [r.response for r in out[1:]] == [" ".join(top.split()[:250])] * 2
    assert out[1].notes == ["response repeats a sentence: top passage used"]  # "I'm glad to help! ..." kept nothing
    assert out[2].notes == ["response is only a heading: top passage used"]
    assert llm.stats["parse_fallbacks"] == 3


def test_human_written_responses_pass_every_response_check(ikat2023, nuggets_2024):
    """The 2023 canonical responses, the 2024 human gold responses and the 2024 manual runs' responses: none is a
    heading, a loop or a repeat (one 2023 response starts with a "System:" role tag)."""
    import json

    texts = [t.response for name in ("train", "test") for t in load_topics(ikat2023 / f"{name}_topics.json")
             if t.response]
    for name in ("manual_responses.json", "gold_responses_human.json"):
        _strings(json.loads((nuggets_2024 / name).read_text()), texts)
    assert len(texts) > 600
    assert [(t[:7], check_response(t)) for t in texts if check_response(t)] == [
        ("System:", "response echoes the prompt template")]


def _strings(value: Any, found: list[str]) -> None:
    """Every string of more than 20 words in a JSON value."""
    if isinstance(value, str) and len(value.split()) > 20:
        found.append(value)
    for child in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        _strings(child, found)


def test_no_real_response_loops_on_a_phrase(ikat2023, nuggets_2024):
    """The 2023 canonical responses and the 2024 gold and submitted responses pass the phrase-loop check."""
    import json

    texts = [t.response for name in ("train", "test") for t in load_topics(ikat2023 / f"{name}_topics.json")
             if t.response]
    for name in ("automatic_responses.json", "manual_responses.json", "gold_responses_human.json"):
        _strings(json.loads((nuggets_2024 / name).read_text()), texts)
    assert len(texts) > 1_200 and [t[:80] for t in texts if looping_phrase(t)] == []


class _EmptyChat(BaseHTTPRequestHandler):
    """An OpenAI-compatible server on loopback whose every completion is empty (each rewrite is refused)."""

    def do_GET(self) -> None:  # noqa: N802
        send_json(self, {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "test"}]})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        send_json(self, completion("", 3, 0))

    def log_message(self, *args: Any) -> None:
        pass


def test_a_runs_refusals_are_one_line_after_the_bars(demo_index, tmp_path, monkeypatch, caplog, capsys):
    """`ikatkit run` holds the guards' per-output warnings back while its bars are drawn and says them in one line
    after them (the demo printed 12 warning lines amid its bars)."""
    from ikatkit.pipelines import run_pipeline

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server = HTTPServer(("127.0.0.1", 0), _EmptyChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path / "empty.toml"
    config.write_text(f'name = "empty"\nbatch_size = 4\n[resources.llm]\nkind = "llm"\nbackend = "openai"\n'
                      f'model = "m"\nbase_url = "http://127.0.0.1:{server.server_port}/v1"\n[resources.bm25]\n'
                      'kind = "bm25"\n[[stages]]\nstage = "rewrite"\n[[stages]]\nstage = "retrieve"\nk = 10\n'
                      'expand_ptkb = false\n[[stages]]\nstage = "respond"\ntask = "extractive"\n', encoding="utf-8")
    topics = load_topics(demo_data() / "topics.json").subset(["demo-1"])
    try:
        with caplog.at_level(logging.WARNING):
            outcome = run_pipeline(config, topics, tmp_path / "out", index=demo_index, cache_dir=tmp_path / "cache")
    finally:
        server.shutdown()
    assert [r.notes for r in outcome.records] == [["empty rewrite: raw utterance used"]] * 6
    assert [r.getMessage() for r in caplog.records if "so far" in r.getMessage()] == []
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("guards:")]
    assert lines == ["guards: 6 LLM outputs refused or cut (empty rewrite: raw utterance used x6); each turn's note "
                     "is on its record (ikatkit view shows them)"]
    with caplog.at_level(logging.WARNING):  # outside a run the LLM still warns of each
        LLM("m").count_fallback()
    assert "1 so far" in caplog.text
