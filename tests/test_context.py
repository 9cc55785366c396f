"""Dialogue context selection on real data: oracle segments of real 2023 conversations, the cascade on a
constructed conversation with a known topic shift over the 894 real passages, what the rewrite prompt
receives, bad input, determinism across batch sizes and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ikatkit.errors import IkatError
from ikatkit.pipelines import load_config, run_pipeline
from ikatkit.stages.context import Cascade, SelectContext, oracle_segments
from ikatkit.pipelines.record import TurnRecord, records_for
from ikatkit.topics import Conversation, Topics, Turn, load_topics, parse_topics


@pytest.fixture(scope="session")
def test_topics(ikat2023) -> Topics:
    return load_topics(ikat2023 / "test_topics.json")


@pytest.fixture(scope="session")
def minilm():
    from ikatkit.rank import make_ranker

    return make_ranker("bi-encoder", "bundled:minilm")


@pytest.fixture(scope="session")
def searcher(passages_index):
    from ikatkit.retrieve.bm25 import Bm25Searcher

    return Bm25Searcher(passages_index)


def test_oracle_contexts_of_a_real_conversation(ikat2023, test_topics):
    raw = next(c for c in json.loads((ikat2023 / "test_topics.json").read_text()) if c["number"] == "17-2")
    cited = {t["turn_id"]: {p.split(":")[0] for p in t["response_provenance"]} for t in raw["turns"]}
    # Read off the file by hand: turns 2, 4 and 5 cite clueweb22-en0006-10-19527 (passages :2 and :3), 4 and 5
    # the same three documents, 6 and 7 the same three, 9, 10 and 15 clueweb22-en0043-24-09297, 11 and 12 the
    # same four; 1, 3 and 14 cite nothing; every other pair shares no document.
    assert cited[2] & cited[4] == {"clueweb22-en0006-10-19527"} and cited[4] == cited[5] and cited[6] == cited[7]
    assert cited[9] & cited[10] & cited[15] == {"clueweb22-en0043-24-09297"} and cited[11] == cited[12]
    expected = {4: [2], 5: [2, 4], 7: [6], 10: [9], 12: [11], 15: [9, 10]}
    records = records_for(test_topics.subset(["17-2"]))
    SelectContext("oracle").transform(records)
    assert len(records) == 16
    for record in records:
        turn = int(record.qid.split("_")[1])
        assert record.context_ids == [f"17-2_{k}" for k in expected.get(turn, [])], record.qid
    # Segments: {2,4,5} {6,7} {8} {9,10,15} {11,12} {13} {16}
    assert oracle_segments([t["response_provenance"] for t in raw["turns"]]) == 7
    assert oracle_segments([["d1:0"], [], ["d2:0", "d1:3"], ["d3:1"]]) == 2


def test_oracle_qrels_adds_turns_citing_judged_passages(ikat2023, test_topics):
    from ikatkit.evaluate.qrels import load_qrels

    qrels = load_qrels(ikat2023 / "qrels.txt")
    assert qrels["9-2_2"]["clueweb22-en0035-35-09152:8"] == 3  # turn 1 cites it; turn 2 cites another document
    records = records_for(test_topics.subset(["9-2"]))[:2]
    SelectContext("oracle").transform(records)
    assert [r.context_ids for r in records] == [[], []]
    SelectContext("oracle_qrels", qrels=str(ikat2023 / "qrels.txt")).transform(records)
    assert [r.context_ids for r in records] == [[], ["9-2_1"]]


SHIFT = [  # three turns on Rome hotels, two on irritable bowel syndrome, then back to the hotels
    "What are good hotels near the Colosseum in Rome?",
    "Which Rome hotels near the Colosseum have a rooftop terrace?",
    "Is a hotel near Termini station in Rome cheaper?",
    "What foods trigger irritable bowel syndrome symptoms?",
    "Does a low FODMAP diet help irritable bowel syndrome?",
    "Do those Rome hotels serve breakfast?",
]


def _conversation(utterances: list[str]) -> Topics:
    turns = tuple(Turn("c", i, u) for i, u in enumerate(utterances, start=1))
    return Topics(2023, (Conversation("c", "constructed", {"1": "I live in Amsterdam."}, turns),))


def test_cascade_finds_a_known_topic_shift(searcher, minilm):
    turns = [(f"c_{i}", u) for i, u in enumerate(SHIFT, start=1)]
    decisions = Cascade(searcher, minilm, threshold=0.4, passages=10, check="utterance").run(turns)
    assert [d["group"] for d in decisions] == [0, 0, 0, 1, 1, 0]
    assert [d["joined"] for d in decisions] == [False, True, True, False, True, True]
    assert [d["context"] for d in decisions] == [[], ["c_1"], ["c_1", "c_2"], [], ["c_4"], ["c_1", "c_2", "c_3"]]
    assert all(0 <= d["score"] <= 1 for d in decisions) and decisions[0]["score"] == 0.0
    assert decisions[3]["score"] < 0.4 <= decisions[4]["score"]
    # The paper's input (utterance + the group's turns) lets a bi-encoder's score follow the history: the IBS
    # turn scores higher against the hotel group than on its own.
    paper = Cascade(searcher, minilm, threshold=0.4, passages=10).run(turns[:4])
    assert paper[3]["score"] > decisions[3]["score"] + 0.2
    # The same stage, one record at a time and in reverse order: the same selection (batch independence).
    stage = SelectContext("cascade_limit", n=2, threshold=0.4, check="utterance", ranker=minilm, searcher=searcher)
    records = list(reversed(records_for(_conversation(SHIFT))))
    for record in records:
        stage.transform([record])
    assert records[0].context_ids == ["c_2", "c_3"]  # turn 6: the hotel group, capped at 2
    assert records[0].context_trace["groups"] == {f"c_{i}": g for i, g in enumerate([0, 0, 0, 1, 1, 0], start=1)}
    coherence = SelectContext("coherence", threshold=0.3, ranker=minilm)
    records = coherence.transform(records_for(_conversation(SHIFT)))
    assert records[4].context_ids == ["c_4"]  # cut at the shift to IBS...
    assert records[5].context_ids == []  # ... and at the shift back: content alone cannot rejoin the hotels


class Capture:
    """A test double at the LLM boundary: records the prompts it is given."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def chat(self, messages: list[list[dict[str, str]]], stop: tuple[str, ...] = ()) -> list[str]:
        self.prompts += [m[-1]["content"] for m in messages]
        return ["What is rewritten here?"] * len(messages)

    def count_fallback(self, what: str = "") -> None:
        raise AssertionError("no fallback expected")


def test_rewrite_prompt_receives_the_selected_turns(test_topics, ikat2023):
    from ikatkit.stages.core import Rewrite

    records = records_for(test_topics.subset(["17-2"]))
    SelectContext("oracle").transform(records)
    llm = Capture()
    Rewrite(llm).transform(records)
    turns = {t.turn_id: t for t in test_topics.conversation("17-2").turns}
    prompt = llm.prompts[14]  # turn 15: context = turns 9 and 10
    context = prompt.split("### Conversational Context:\n")[1].split("\n\n### User Question:")[0]
    assert context == f"User: {turns[9].utterance}\nUser: {turns[10].utterance}\nSystem: {turns[10].response}"
    assert "(none: this is the first turn)" in llm.prompts[2]  # turn 3: no turn shares its (absent) provenance
    everything = records_for(test_topics.subset(["17-2"]))  # without the stage: the whole history, as before
    Rewrite(llm).transform(everything)
    assert llm.prompts[-2].count("User: ") == 14 and turns[1].utterance in llm.prompts[-2]


def test_record_round_trips_with_context(test_topics):
    records = records_for(test_topics.subset(["17-2"]))
    SelectContext("last", n=2).transform(records)
    record = records[5]
    assert record.history_ids == [f"17-2_{k}" for k in range(1, 6)] and record.context_ids == ["17-2_4", "17-2_5"]
    again = TurnRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record and again.context_history == record.history[-2:]


PIPELINE = """
name = "context-bm25"
run_type = "{run_type}"
batch_size = {batch}

[resources.minilm]
kind = "bi-encoder"
model = "bundled:minilm"

[resources.bm25]
kind = "bm25"

[[stages]]
stage = "select_context"
method = "{method}"
threshold = 0.4
passages = 3
scorer = "{scorer}"

[[stages]]
stage = "context_query"

[[stages]]
stage = "retrieve"
k = 100
expand_ptkb = false

[[stages]]
stage = "respond"
task = "extractive"
"""


def _config(folder: Path, method: str = "cascade", batch: int = 16, run_type: str = "automatic",
            scorer: str = "ranker") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "context.toml"
    path.write_text(PIPELINE.format(method=method, batch=batch, run_type=run_type, scorer=scorer))
    return path


@pytest.mark.parametrize("scorer", ["ranker", "lexical"])
def test_cascade_run_is_deterministic_across_batches_and_resume(judged, tmp_path, scorer):
    """Conversation 13-1 of the 2023 test year (8 turns), then demo conversation 1 (6 turns): three batches."""
    topics = load_topics(judged.topics).subset(["13-1" if judged.name == "ikat2023" else "demo-1"])
    batch = -(-len(topics) // 3)
    index = judged.index
    whole = run_pipeline(_config(tmp_path / "a", scorer=scorer), topics, tmp_path / "a" / "run", index=index)
    small = _config(tmp_path / "b", batch=batch, scorer=scorer)
    with pytest.raises(IkatError, match="rerun to resume"):
        run_pipeline(small, topics, tmp_path / "b" / "run", index=index, max_batches=2)
    resumed = run_pipeline(small, topics, tmp_path / "b" / "run", index=index)
    assert resumed.batches_done_now == 1 and resumed.valid is True
    assert resumed.run_file.read_bytes() == whole.run_file.read_bytes()
    assert [r.context_ids for r in resumed.records] == [r.context_ids for r in whole.records]
    assert [r.context_trace for r in resumed.records] == [r.context_trace for r in whole.records]
    first = whole.records[0]
    assert first.qid == f"{topics.conversations[0].id}_1" and first.context_ids == [] and first.query == first.utterance
    for record in whole.records:  # the query is the utterance plus the selected turns' utterances
        kept = [u for qid, (u, _) in zip(record.history_ids, record.history) if qid in record.context_ids]
        assert record.query == " ".join([record.utterance, *kept])


def test_bad_context_options_name_the_config_line(demo_dir, demo_index, tmp_path):
    shipped = load_config(Path(__file__).parents[1] / "configs" / "rtg_context_cascade.toml")
    assert shipped.stages[0] == {"stage": "select_context", "method": "cascade_limit", "n": 6, "threshold": 0.7,
                                 "passages": 10, "ranker": "context_scorer"}
    with pytest.raises(IkatError, match=r"context.toml \(stages\[0\] \(select_context\)\): method = \"topic\" is not"):
        load_config(_config(tmp_path, method="topic"))
    path = _config(tmp_path)
    path.write_text(path.read_text().replace("threshold = 0.4", "threshold = 1.5"))
    with pytest.raises(IkatError, match=r"stages\[0\] \(select_context\)\): threshold = 1.5 is outside \[0, 1\]"):
        load_config(path)
    path.write_text(path.read_text().replace("threshold = 1.5", "threshold = 0.4").replace('"ranker"', '"tfidf"'))
    with pytest.raises(IkatError, match=r'stages\[0\] \(select_context\)\): scorer = "tfidf" is not a context scorer'):
        load_config(path)
    with pytest.raises(IkatError, match='method = "oracle" reads gold provenance, so the run must be marked manual'):
        load_config(_config(tmp_path, method="oracle"))
    raw = json.loads((demo_dir / "topics.json").read_text())[:1]
    for turn in raw[0]["turns"]:
        turn.pop("response_provenance")
    bare = parse_topics(raw, 2023)
    with pytest.raises(IkatError, match=r"stages\[0\] \(select_context\)\): method = \"oracle\" reads "
                                        "response_provenance, and no turn of these topics has any"):
        run_pipeline(_config(tmp_path, method="oracle", run_type="manual"), bare, tmp_path / "run", index=demo_index)
    path = _config(tmp_path / "noranker")
    path.write_text(path.read_text().replace('[resources.minilm]\nkind = "bi-encoder"\nmodel = "bundled:minilm"\n', ""))
    with pytest.raises(IkatError, match=r"stages\[0\] \(select_context\)\): method = \"cascade\" needs a scorer"):
        run_pipeline(path, load_topics(demo_dir / "topics.json").subset(["demo-1"]), tmp_path / "run2",
                     index=demo_index)


def test_context_command_evaluates_methods(ikat2023, passages_index, tmp_path, capsys):
    from ikatkit.cli import main
    from ikatkit.studies.context import evaluate_context
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.retrieve.bm25 import Bm25Searcher

    assert main(["context", "--topics", str(ikat2023 / "test_topics.json"), "--index", str(passages_index),
                 "--qrels", str(ikat2023 / "qrels.txt"), "--cascade-threshold", "2"]) == 2
    assert "--cascade-threshold: threshold = 2.0 is outside [0, 1]" in capsys.readouterr().err
    topics = load_topics(ikat2023 / "test_topics.json").subset(["17-2", "9-2"])
    result = evaluate_context(topics, passages_index, ikat2023 / "qrels.txt", methods=["last", "oracle"], n=2)
    assert result.conversations[">= 2 oracle segments"] == ["17-2", "9-2"]
    oracle, everything, last = (result.agreement[m] for m in ("oracle", "all", "last"))
    assert oracle["precision"] == oracle["recall"] == 1.0
    # by hand: 17-2 has 13 turns with provenance (78 pairs), 8 pairs sharing a document (see above); 9-2 has 11
    # (55 pairs), none sharing one
    assert everything == {"precision": 8 / 133, "recall": 1.0, "predicted_pairs": 133, "oracle_pairs": 8}
    assert last["predicted_pairs"] < 133 and last["oracle_pairs"] == 8
    # the `all` query of judged turn 17-2_4 is its utterance plus those of turns 1-3, scored as ir-measures scores it
    turns = topics.conversation("17-2").turns
    hits = Bm25Searcher(passages_index).search(" ".join([turns[3].utterance] + [t.utterance for t in turns[:3]]), 1000)
    qrels = {"17-2_4": load_qrels(ikat2023 / "qrels.txt")["17-2_4"]}
    expected = evaluate({"17-2_4": dict(hits)}, qrels, ["nDCG@3", "R(rel=2)@10"])
    measured = result.comparisons["all conversations"].results["all"].per_query["17-2_4"]
    assert measured["nDCG@3"] == pytest.approx(expected.mean["nDCG@3"])
    assert measured["R(rel=2)@10"] == pytest.approx(expected.mean["R(rel=2)@10"])
    assert len(result.comparisons["all conversations"].results["oracle"].evaluated) == 16  # 9 + 7 judged turns
    assert "| oracle |" in result.to_markdown()
    from ikatkit.studies.context import write_evaluation

    markdown, data = write_evaluation(result, tmp_path / "eval")
    saved = json.loads(data.read_text())  # strict JSON: the baseline's p-values are null, not NaN
    assert saved["agreement"]["oracle"]["precision"] == 1.0 and markdown.read_text() == result.to_markdown()
    assert {row["p"] for row in saved["results"]["all conversations"]["rows"] if row["run"] == "all"} == {None}


@pytest.fixture(scope="session")
def lexical(passages_index):
    from ikatkit.rank.lexical import TfidfCosine

    return TfidfCosine(passages_index)


def test_lexical_scorer_is_scikit_learns_tfidf_cosine(lexical, passages_jsonl):
    """TF-IDF cosine with document frequencies from the Lucene index = scikit-learn's sublinear, smoothed TF-IDF
    fitted on the same passages (the tokens are the analyzer's in both), for pairs of indexed passages."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    texts = [json.loads(line)["contents"] for line in passages_jsonl.read_text().splitlines()]
    assert len(texts) == 894
    tokens = dict(zip(texts, lexical.tokens(texts)))
    reference = TfidfVectorizer(analyzer=tokens.__getitem__, sublinear_tf=True).fit(texts)
    pairs = [(texts[i], texts[(7 * i + 3) % 894]) for i in range(0, 894, 9)]
    expected = cosine_similarity(reference.transform([a for a, _ in pairs]), reference.transform([b for _, b in pairs]))
    assert lexical.score(pairs) == pytest.approx(list(expected.diagonal()), abs=1e-12)
    assert lexical.score([(texts[0], texts[0])]) == pytest.approx([1.0])
    assert lexical.score([("the of and", texts[0])]) == [0.0]  # stop words only: no indexed term, no vector
    # the Java helper's tokens are Pyserini's analyzer's
    from ikatkit.java import import_pyserini

    analyzer = import_pyserini("pyserini.analysis").Analyzer(lexical.analyzer)
    assert [analyzer.analyze(t) for t in texts[:20]] == lexical.tokens(texts[:20])


def test_cascade_with_the_lexical_scorer_finds_the_shift(searcher, lexical):
    turns = [(f"c_{i}", u) for i, u in enumerate(SHIFT, start=1)]
    decisions = Cascade(searcher, lexical, threshold=0.1, passages=10, check="utterance").run(turns)
    assert [d["group"] for d in decisions] == [0, 0, 0, 1, 1, 0]


def test_a_query_retrieving_nothing_scores_zero_on_every_judged_turn(ikat2023, passages_index):
    """A turn whose query retrieves nothing (a rewrite of stopwords: SmolLM2 rewrote 17-3_3 "Yes." to "No.")
    is scored 0 ("no" is a Lucene stopword), not left out: every method is tested on all judged turns."""
    from dataclasses import replace

    from ikatkit.studies.context import evaluate_context
    from ikatkit.topics import Topics

    real = load_topics(ikat2023 / "test_topics.json").subset(["9-2"])
    conversation = real.conversations[0]
    turns = tuple(replace(t, utterance="No, no, no.") if t.turn_id in (1, 2) else t for t in conversation.turns)
    topics = Topics(real.year, (replace(conversation, turns=turns),))
    result = evaluate_context(topics, passages_index, ikat2023 / "qrels.txt", methods=["last"], n=2)
    judged = {qid for qid in load_qrels_ids(ikat2023 / "qrels.txt") if qid.startswith("9-2_")}
    assert len(judged) == 7
    for method in ("all", "last"):
        found = result.comparisons["all conversations"].results[method]
        assert set(found.per_query) == judged and "9-2_2" in found.missing
        assert found.per_query["9-2_2"] == {"R(rel=2)@1": 0, "R(rel=2)@5": 0, "R(rel=2)@10": 0, "nDCG@3": 0}


def load_qrels_ids(path) -> set[str]:
    """The judged turns of a qrels file, read here without ikatkit."""
    return {line.split()[0] for line in open(path, encoding="utf-8") if line.strip()}
