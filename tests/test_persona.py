"""Persona tracking: the rule extractor, the LLM output guard, the track_persona stage and its store over real
2023 topics, and persona-eval on hand-computed cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ikatkit.errors import IkatError
from ikatkit.llm import LLM
from ikatkit.studies.persona import PersonaCase, evaluate, revealed, rule_extract
from ikatkit.stages.persona import PersonaStore, TrackPersona, check_statements, self_statements
from ikatkit.pipelines.record import TurnRecord, records_for


@pytest.mark.parametrize("utterance, expected", [
    ("I'm vegan. What should I eat tonight?", ["I'm vegan."]),
    ("i have two kids and my wife works nights.", ["I have two kids and my wife works nights."]),
    ("I want to start my master's degree, can you help me with finding a university?",
     ["I want to start my master's degree."]),
    ("Yes, I want to continue my studies in computer science.",
     ["I want to continue my studies in computer science."]),
    ("I am not interested in museums. Are there any outdoor activities?", ["I am not interested in museums."]),
    ("If I visit one or two, which should I visit?", []),                 # a condition, then a question
    ("Can you tell me about my options?", []),                            # a question
    ("Please recommend a diet for me.", []),                              # a request
    ("I'd like to know more about vegan diets.", []),                     # an information request
    ("I want you to find me a cheap flight.", []),                        # addressed to the system
    ("I see, thanks! What are some cheese substitutes?", []),             # talk about the dialogue
    ("No, I mean cardio.", []),
    ("Tell me more about the Keto diet.", []),                            # no first person
    ("My knee hurts after running. My knee hurts after running!", ["My knee hurts after running."]),  # once
    ("I have diabetes; what can I eat?", ["I have diabetes."]),
])
def test_rule_extractor(utterance: str, expected: list[str]) -> None:
    assert self_statements(utterance) == expected


def test_llm_output_guard() -> None:
    utterance = "I have a knee injury, which sports can I still do?"
    assert check_statements("I have a knee injury.\nI like sports", utterance) == (
        ["I have a knee injury.", "I like sports."], None)
    assert check_statements("none", utterance) == ([], None)
    assert check_statements("I own a red Ferrari.", utterance)[1] == "no persona statement grounded in the utterance"
    assert check_statements("User: I have a knee injury.", utterance)[1] == "persona statements echo the prompt"
    assert check_statements("What sports can I do?", utterance)[1] is not None  # a question is no statement


def test_check_rejects_bad_options() -> None:
    with pytest.raises(IkatError, match="unknown persona extractor"):
        TrackPersona(extractor="spacy")
    with pytest.raises(IkatError, match="needs an LLM"):
        TrackPersona(extractor="llm")


@pytest.fixture(scope="module")
def test_records(ikat2023: Path) -> dict[str, list[TurnRecord]]:
    """Fresh records of 2023 test conversations 9-2 and 10-1, by conversation."""
    from ikatkit.topics import load_topics

    topics = load_topics(ikat2023 / "test_topics.json").subset(["9-2", "10-1"])
    records = records_for(topics)
    return {c: [r.to_json() for r in records if r.qid.startswith(c + "_")] for c in ("9-2", "10-1")}


def _fresh(test_records: dict, conversation: str, user: str = "") -> list[TurnRecord]:
    records = [TurnRecord.from_json(json.loads(json.dumps(r))) for r in test_records[conversation]]
    for record in records:
        record.user_id = user
    return records


def test_stage_keeps_statements_per_user_across_topics(test_records, tmp_path: Path) -> None:
    stage = TrackPersona(store=str(tmp_path / "persona"))
    first = stage.transform(_fresh(test_records, "9-2", "alice"))
    topic_ptkb = dict(_fresh(test_records, "9-2")[0].ptkb_all)
    turn1, turn5 = first[0], first[4]
    assert {k: v for k, v in turn1.ptkb_all.items() if k in topic_ptkb} == topic_ptkb  # the topic's own untouched
    assert {k: v for k, v in turn1.ptkb_all.items() if k not in topic_ptkb} == {"u1": "I think I am overweight."}
    assert "I can't exercise." in turn5.ptkb_all.values()
    assert "I don't have diabetes and also I'm not into following celebrities." not in turn5.ptkb_all.values()  # later
    second = stage.transform(_fresh(test_records, "10-1", "alice"))  # the same user, another topic
    assert "I can't exercise." in second[0].ptkb_all.values()
    assert "I can't exercise." not in TrackPersona().transform(_fresh(test_records, "10-1", "bob"))[0].ptkb_all.values()
    offline = TrackPersona().transform(_fresh(test_records, "10-1"))  # no user id: keyed by the conversation
    assert "I can't exercise." not in offline[0].ptkb_all.values()
    assert "My children don't like vinegar, so I would probably go with lime juice." in offline[3].ptkb_all.values()
    # a turn processed again (a resumed batch) is offered what it was offered the first time
    again = stage.transform(_fresh(test_records, "9-2", "alice"))
    assert [r.ptkb_all for r in again] == [r.ptkb_all for r in first]


def test_keys_never_collide_with_the_topics(test_records) -> None:
    records = _fresh(test_records, "9-2")[:1]
    records[0].ptkb_all["u1"] = "A topic statement keyed u1."
    out = TrackPersona().transform(records)[0]
    assert out.ptkb_all["u1"] == "A topic statement keyed u1."
    assert out.ptkb_all["uu1"] == "I think I am overweight."


def test_rank_ptkb_sees_the_statements(test_records) -> None:
    from sentence_transformers import SentenceTransformer

    from ikatkit.models import resolve_model
    from ikatkit.stages.core import RankPtkb
    from ikatkit.rank import make_ranker

    record = TrackPersona().transform(_fresh(test_records, "9-2"))[4]  # "I can't exercise. So I think ..."
    record.query = record.utterance
    RankPtkb(make_ranker("bi-encoder", "bundled:minilm"), k=100).transform([record])
    assert {k for k, _ in record.ptkb} == set(record.ptkb_all)
    # the top statement is the one an independent encoding of the same model puts closest to the utterance
    model = SentenceTransformer(resolve_model("bundled:minilm"), device="cpu")
    keys = list(record.ptkb_all)
    vectors = model.encode([record.utterance, *(record.ptkb_all[k] for k in keys)], normalize_embeddings=True)
    assert record.ptkb[0][0] == keys[int(np.argmax(vectors[1:] @ vectors[0]))]
    assert record.ptkb[0][0].startswith("u")


def test_store_survives_a_restart(test_records, tmp_path: Path) -> None:
    folder = tmp_path / "persona"
    TrackPersona(store=str(folder)).transform(_fresh(test_records, "9-2", "alice")[:5])
    kept = json.loads((folder / "persona.json").read_text())
    assert [s["text"] for s in kept["users"]["alice"]["statements"]] == [
        "I think I am overweight.", "I heard about BMI.", "I can't exercise."]
    assert kept["users"]["alice"]["turns"] == [f"9-2_{i}" for i in range(1, 6)]
    later = TrackPersona(store=str(folder)).transform(_fresh(test_records, "10-1", "alice")[:1])  # a new process
    assert {"I think I am overweight.", "I can't exercise."} <= set(later[0].ptkb_all.values())
    with pytest.raises(IkatError, match="built by extractor 'rule'"):
        PersonaStore(folder, "llm:bundled:smollm2")


def test_config_with_track_persona_loads(tmp_path: Path) -> None:
    from ikatkit.pipelines.config import load_config

    config = tmp_path / "persona.toml"
    config.write_text('name = "p"\n[resources.minilm]\nkind = "bi-encoder"\nmodel = "bundled:minilm"\n'
                      '[[stages]]\nstage = "track_persona"\n[[stages]]\nstage = "raw_query"\n'
                      '[[stages]]\nstage = "rank_ptkb"\nranker = "minilm"\n')
    assert [s["stage"] for s in load_config(config).stages] == ["track_persona", "raw_query", "rank_ptkb"]
    config.write_text(config.read_text().replace('stage = "track_persona"\n',
                                                 'stage = "track_persona"\nextractor = "llm"\n'))
    with pytest.raises(IkatError, match="needs an LLM") as err:
        load_config(config)
    assert "stages[0].extractor, line 7" in str(err.value)


def test_revealed_rule() -> None:
    assert revealed("I have diabetes.", ["Ok. I have diabetes. What can I eat?"])
    assert revealed("I have asthma.", ["Is my asthma a problem when running?"])  # a question speaks of the user
    assert not revealed("I have asthma.", ["What is asthma?"])                    # not about the user
    assert not revealed("I live in Paris.", ["I love Paris in spring."])           # 1 of 2 content words
    assert revealed("My dog is called Rex.", ["My dog Rex is ill."])               # 2 of 3


CASES = [PersonaCase("a", ("I have diabetes. What should I eat?", "My dog is called Rex.", "I prefer tea."),
                     ("I have diabetes.", "I live in Paris.", "My dog is called Rex.")),
         PersonaCase("b", ("Is my asthma a problem when running?",), ("I have asthma.",))]


def test_persona_eval_hand_computed() -> None:
    """Revealed: a's diabetes and dog, b's asthma (3). The rule extracts 'I have diabetes.', 'My dog is called
    Rex.' (the statements themselves: cosine 1) and 'I prefer tea.' (matches nothing); b's question gives none.
    Precision 2/3, recall 2/3."""
    from ikatkit.rank import make_ranker

    score = evaluate(CASES, rule_extract, make_ranker("bi-encoder", "bundled:minilm").encode, 0.55)
    assert (score.revealed, score.extracted, score.correct, score.found) == (3, 3, 2, 2)
    assert score.precision == pytest.approx(2 / 3) and score.recall == pytest.approx(2 / 3)


def _topics_file(folder: Path) -> Path:
    """CASES[0] as a 2023 topics file."""
    topics = [{"number": "1-1", "title": "t", "ptkb": {"1": "I have diabetes.", "2": "I live in Paris.",
                                                      "3": "My dog is called Rex."},
               "turns": [{"turn_id": i, "utterance": u, "resolved_utterance": u, "response": "ok",
                          "ptkb_provenance": [], "response_provenance": []}
                         for i, u in enumerate(CASES[0].utterances, 1)]}]
    path = folder / "topics.json"
    path.write_text(json.dumps(topics))
    return path


def test_persona_eval_cli(tmp_path: Path, capsys) -> None:
    from ikatkit.cli import main

    path = _topics_file(tmp_path)
    assert main(["persona-eval", "--topics", str(path), "--cache", str(tmp_path / "cache")]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| topics.json")][0]
    assert [c.strip() for c in row.split("|")[3:10]] == ["1", "3", "3", "2", "3", "2", "2"]
    assert main(["persona-eval", "--topics", str(path), "--threshold", "1.5"]) == 2


def test_run_keeps_the_store_in_its_out_folder(demo_dir: Path, demo_index: Path, tmp_path: Path) -> None:
    """``ikatkit run`` with track_persona: the store lands in <out>/persona and rank_ptkb ranks the statements; the
    official run cites only the topics' own PTKB keys (a ``u1`` there made the validator fail the run), and the
    manifest counts the statements left out."""
    from ikatkit.pipelines.runner import run_pipeline

    config = tmp_path / "persona.toml"
    config.write_text('name = "persona"\n[resources.minilm]\nkind = "bi-encoder"\nmodel = "bundled:minilm"\n'
                      '[resources.bm25]\nkind = "bm25"\n[[stages]]\nstage = "track_persona"\n'
                      '[[stages]]\nstage = "raw_query"\n[[stages]]\nstage = "rank_ptkb"\nranker = "minilm"\nk = 100\n'
                      '[[stages]]\nstage = "retrieve"\nk = 10\n[[stages]]\nstage = "respond"\ntask = "extractive"\n')
    outcome = run_pipeline(config, demo_dir / "topics.json", tmp_path / "out", index=demo_index,
                           cache_dir=tmp_path / "cache", validate=True)
    store = json.loads((tmp_path / "out" / "persona" / "persona.json").read_text())
    assert [s["text"] for s in store["users"]["demo-2"]["statements"]] == [
        "I'm thinking about Japan.", "I don't eat meat."]
    assert [s["text"] for s in store["users"]["demo-1"]["statements"]] == ["It hurts after my long runs."]
    turn = next(r for r in outcome.records if r.qid == "demo-2_4")
    assert {"u1", "u2"} <= {key for key, _ in turn.ptkb}
    assert turn.ptkb_all["u2"] == "I don't eat meat."
    own = {r.qid: set(r.ptkb_all) - {k for k in r.ptkb_all if k.startswith("u")} for r in outcome.records}
    cited = {t.turn_id: [ref.key for ref in t.responses[0].ptkb] for t in outcome.run.turns}
    assert cited["demo-2_4"] == [key for key, _ in turn.ptkb if key in own["demo-2_4"]]
    assert all(set(keys) <= own[qid] for qid, keys in cited.items())
    persona_refs = sum(key.startswith("u") for r in outcome.records for key, _ in r.ptkb)
    assert persona_refs >= 2
    assert json.loads(outcome.manifest_file.read_text())["ptkb_not_cited"] == persona_refs
    assert outcome.valid, (tmp_path / "out" / "validation.txt").read_text()


class _DiesOnCall(LLM):
    """The real LLM base class (its disk cache) over a generator that dies on its ``die``-th call, as a killed
    process would: what earlier calls generated must be in the cache."""

    backend = "test"

    def __init__(self, cache_dir: Path, die: int | None = None) -> None:
        super().__init__("m", cache_dir=str(cache_dir))
        self.batches: list[int] = []
        self.die = die

    def _generate(self, batch: list, params: dict) -> list[tuple[str, int, int]]:
        self.batches.append(len(batch))
        if len(self.batches) == self.die:
            raise KeyboardInterrupt
        return [("none", 1, 1) for _ in batch]


def test_llm_extractor_keeps_progress_of_a_killed_run(tmp_path: Path) -> None:
    """20 utterances go to the LLM 8 at a time (LLM_BATCH): killed in its second call, a run leaves the first 8
    outputs in the cache, and the rerun generates only the other 12 (8 + 4)."""
    from ikatkit.stages.persona import LLM_BATCH, llm_statements

    assert LLM_BATCH == 8
    utterances = [f"I have {n} cats." for n in range(20)]
    killed = _DiesOnCall(tmp_path, die=2)
    with pytest.raises(KeyboardInterrupt):
        llm_statements(killed, utterances)
    assert killed.batches == [8, 8]
    rerun = _DiesOnCall(tmp_path)
    extracted, problems = llm_statements(rerun, utterances)
    assert rerun.batches == [8, 4] and rerun.stats["hits"] == 8
    assert extracted == {u: [] for u in utterances} and problems == {}  # "none": no statement, no problem


def test_persona_eval_with_an_llm_config(tmp_path: Path, capsys) -> None:
    """persona-eval --llm-config: the bundled SmolLM2 on a real llama.cpp server (1 thread), openai backend."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed by `make setup-test`")
    from ikatkit.cli import main
    from ikatkit.llm.server import llama_cpp_server

    path = _topics_file(tmp_path)
    config = tmp_path / "llm.toml"
    with llama_cpp_server("bundled:smollm2", n_threads=1, ready_timeout=90) as url:
        config.write_text(f'[llm]\nbackend = "openai"\nmodel = "smollm2"\nbase_url = "{url}"\n')
        argv = ["persona-eval", "--topics", str(path), "--llm-config", str(config), "--llm-only",
                "--cache", str(tmp_path / "cache")]
        assert main(argv) == 0
        first = capsys.readouterr().out
        assert main(argv) == 0
        again = capsys.readouterr().out
    row = [line for line in first.splitlines() if line.startswith("| topics.json")]
    assert len(row) == 1 and row[0].split("|")[2].strip() == "llm smollm2"
    assert [c.strip() for c in row[0].split("|")[3:7]] == ["1", "3", "3", "2"]  # users, utterances, PTKB, revealed
    assert "llm smollm2: 3 utterances (0 from the cache)" in first
    assert "llm smollm2: 3 utterances (3 from the cache)" in again and again.split("\n\n")[1] == first.split("\n\n")[1]
    assert main(["persona-eval", "--topics", str(path), "--llm-config", str(tmp_path / "absent.toml")]) == 2
    assert "LLM config not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one LLM: --llm or --llm-config
        main(["persona-eval", "--topics", str(path), "--llm", "bundled:smollm2", "--llm-config", str(config)])
