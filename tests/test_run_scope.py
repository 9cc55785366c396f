"""What a run covers: conversations that exist (did-you-mean), the topics' year (no 2024 run of 2023 turns), and
a summary that says what was validated, its warnings, and what a run of some conversations lacks as an official
run."""

from __future__ import annotations

import json

import pytest

from ikatkit.cli import main
from ikatkit.errors import IkatError
from ikatkit.topics import load_topics, parse_topics

from bm25_config import BM25_EXTRACTIVE


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "bm25.toml"
    path.write_text(BM25_EXTRACTIVE, encoding="utf-8")
    return path


def test_run_of_two_conversations_says_what_was_validated(ikat2023, passages_index, config, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", str(config), "--topics", str(ikat2023 / "test_topics.json"), "--conversations", "9-1", "10-1",
                 "--index", str(passages_index), "--out", str(out)]) == 0
    # 9-1 has 6 turns, 10-1 21; the gold PTKB of 15 of them cites nothing (one no-ptkb warning each)
    assert capsys.readouterr().out.splitlines()[-2:] == [
        f"  validation:   valid for the 2 conversations run (27 turns), 15 warnings (no-ptkb x15) (see "
        f"{out / 'validation.txt'})",
        "                as an official run it misses 305 of the topics' 332 turns (`ikatkit validate` of it: "
        "INVALID, missing-turn x305)"]
    assert (out / "validation.txt").read_text().splitlines()[0].startswith("WARNING no-ptkb: ") \
        and "15x in 15 turns" in (out / "validation.txt").read_text()
    assert main(["validate", str(out / "bm25-extractive.json"), "--topics", str(ikat2023 / "test_topics.json")]) == 1
    printed = capsys.readouterr().out
    assert "ERROR   missing-turn: turn of the topics missing from the run — 305x in 305 turns" in printed
    assert printed.rstrip().endswith("-> INVALID")


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_an_unknown_conversation_gets_a_did_you_mean(ikat2023, passages_index, config, tmp_path, capsys, command):
    topics = ikat2023 / "test_topics.json"
    args = {"run": ["run", str(config), "--topics", str(topics), "--index", str(passages_index), "--out",
                    str(tmp_path / "run"), "--conversations", "10-1", "9-9"],
            "simulate": ["simulate", "--topics", str(topics), "--token", "t", "--conversations", "10-1", "9-9"]}
    assert main(args[command]) == 2
    assert capsys.readouterr().err == (
        f"ikatkit: error: {topics}: --conversations: no conversation '9-9' in the topics — fix: did you mean '9-2' "
        "or '9-1'? pass conversations of these topics (25, e.g. 9-1, 9-2, 10-1)\n")
    assert not (tmp_path / "run").exists()


def test_a_year_the_topics_are_not_is_refused(ikat2023, config, tmp_path, capsys):
    topics = ikat2023 / "test_topics.json"
    assert main(["run", str(config), "--topics", str(topics), "--year", "2024", "--out", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err == (
        f"ikatkit: error: {topics}: the file looks like 2023 topics (conversation numbers such as '9-1': topic-user), "
        "not 2024: a 2024 run of them would be 2023's turns in 2024's format — fix: leave --year out (they read as "
        "2023 topics), or pass the 2024 topics; to rehearse the 2024 format on 2023's turns, convert a run of them: "
        "`ikatkit convert RUN --to 2024 --out FILE`\n")
    assert load_topics(topics, 2023).year == 2023  # the year they are: as before
    data = json.loads(topics.read_text())[:1]
    data[0]["number"] = 9
    with pytest.raises(IkatError, match="looks like 2024 topics \\(integer conversation numbers\\), not 2023"):
        parse_topics(data, 2023)
    data[0]["number"] = "0"  # a 2024 file with string numbers: read as 2024 when asked, as the docstring says
    assert parse_topics(data, 2024).year == 2024


def test_other_topics_in_the_same_folder_are_refused_in_plain_words(ikat2023, passages_index, config, tmp_path):
    from ikatkit.pipelines import run_pipeline

    topics = load_topics(ikat2023 / "test_topics.json")
    run_pipeline(config, topics.subset(["9-1"]), tmp_path / "run", index=passages_index)
    with pytest.raises(IkatError, match="holds checkpoints of other topics — fix: use a new --out"):  # was 'another'
        run_pipeline(config, topics.subset(["10-1"]), tmp_path / "run", index=passages_index)


def test_one_turn_without_a_resolved_utterance_is_said_in_the_singular(ikat2023, caplog):
    """Counts read as numbers do (issue 69's "12 turn"): the 2023 test topics lack one resolved utterance."""
    with caplog.at_level("WARNING", logger="ikatkit.topics"):
        load_topics(ikat2023 / "test_topics.json").queries("manual")
    assert caplog.messages == ["1 turn has an empty resolved_utterance (12-1_12); its raw utterance is used"]
