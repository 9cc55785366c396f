"""Topics of every year into one model, on the real 2023 files and written 2024/2025 files."""

from __future__ import annotations

import json

import pytest

from ikatkit.errors import IkatError
from ikatkit.topics import load_topics, split_query_id


def test_2023_counts(ikat2023):
    test = load_topics(ikat2023 / "test_topics.json")
    train = load_topics(ikat2023 / "train_topics.json")
    assert (test.year, len(test.conversations), len(test)) == (2023, 25, 332)
    assert (len(train.conversations), len(train)) == (11, 95)
    turn = test.turn("9-1_1")
    assert turn.utterance == "Can you help me find a diet for myself?"
    assert turn.ptkb_provenance == ("5", "4", "2")
    assert test.conversation_of("9-1_1").ptkb["5"] == "I'm vegetarian."
    assert test.queries("manual")["9-1_1"].startswith("Can you help me find a diet for myself considering")
    manual = test.queries("manual")
    assert manual["12-1_12"] == test.turn("12-1_12").utterance  # the one turn whose resolved_utterance is empty
    assert [t.turn_id for t in test.conversation("9-1").history(3)] == [1, 2]


def test_2024_and_2025_shapes(tmp_path):
    y24 = [{"number": 0, "title": "Egypt", "ptkb": {"1": "I practice yoga.", "12": "I am from San Francisco."},
            "turns": [{"turn_id": 1, "utterance": "Visa?", "resolved_utterance": "Visa for Egypt?",
                       "response": "Yes.", "ptkb_provenance": [12],
                       "response_provenance": ["clueweb22-en0023-79-17324:0"]}]}]
    y25 = [{"number": "1-1", "title": "Acid reflux", "ptkb": ["I eat late.", "I like kiwi."],
            "responses": [{"turn_id": 3, "user_utterance": "Fruits?", "resolved_utterance": "Kiwi for reflux?",
                           "response": "No.", "relevant_ptkbs": ["I like kiwi."],
                           "citations": ["clueweb22-en0026-73-16809:6"]}]}]
    (tmp_path / "t24.json").write_text(json.dumps(y24))
    (tmp_path / "t25.json").write_text(json.dumps(y25))
    t24 = load_topics(tmp_path / "t24.json")
    t25 = load_topics(tmp_path / "t25.json")
    assert t24.year == 2024 and t24.qids == ["0_1"] and t24.turn("0_1").ptkb_provenance == ("12",)
    assert t25.year == 2025 and t25.qids == ["1-1_3"]
    assert t25.turn("1-1_3").ptkb_provenance == ("2",)
    assert t25.turn("1-1_3").response_provenance == ("clueweb22-en0026-73-16809:6",)
    assert split_query_id("1-1_3") == ("1-1", 3)


def test_malformed_topics_name_the_place(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"number": "9-1", "ptkb": {"1": "x"}, "turns": [{"turn_id": 1}]}]))
    with pytest.raises(IkatError,
                       match=r"bad.json \(conversation 0 \(number 9-1\), turn 0 \(turn_id 1\)\): "
                       r"missing field 'utterance'"):
        load_topics(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"number": "9-1",\n "turns": [}')
    with pytest.raises(IkatError, match="line 2"):
        load_topics(broken)
    with pytest.raises(IkatError, match="looks like 2023 topics, not 2025"):
        load_topics(tmp_path / "bad.json", year=2025)
