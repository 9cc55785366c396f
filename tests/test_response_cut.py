"""A response stopped by the generation limit ends at a sentence, not inside a word (issue 38: demo-1_1 ended
"... lact")."""

from __future__ import annotations

from ikatkit.llm.guards import end_at_sentence


def test_an_unfinished_last_sentence_is_dropped():
    text = "Dairy gives calcium for strong bones. Milk also has vitamin D and protein. Many adults are lact"
    assert end_at_sentence(text) == "Dairy gives calcium for strong bones. Milk also has vitamin D and protein."
    assert end_at_sentence('The coach said "eat more beans and lentils." Then he left and we ate') == (
        'The coach said "eat more beans and lentils."')


def test_what_has_no_unfinished_prose_sentence_is_kept():
    assert end_at_sentence("Tofu and lentils give protein.  ") == "Tofu and lentils give protein."
    assert end_at_sentence("second response about tofu") == "second response about tofu"  # no sentence before
    listed = "Sources rich in omega-3 fats help you.\n- Ground flaxseed\n- Chia seeds"
    assert end_at_sentence(listed) == listed  # a list after the last sentence is kept
    assert end_at_sentence("Eat tofu. Then beans") == "Eat tofu. Then beans"  # fewer than 8 words would be left
    numbered = "Good options for a vegetarian athlete are 1. tofu 2. beans 3. lentils and 4. seitan"
    assert end_at_sentence(numbered) == numbered  # "1." and "3.5" end no sentence
