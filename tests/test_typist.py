"""The typing sessions' simulated user: the keys they press, where they pause, what they take."""

from __future__ import annotations

from evaluation.typing_sessions.regions import region_in
from evaluation.typing_sessions.typist import Key, Taken, judge, keys_of, keys_to_type, word_steps


def test_a_region_is_typed_key_by_key_with_a_pause_before_each_token():
    keys = keys_of("x = f(a)\n    return x")
    assert "".join(k.text for k in keys) == "x = f(a)\n    return x"
    paused = [k.text for k in keys if k.pause]
    assert paused == ["x", "=", "f", "(", "a", ")", "r", "x"]  # runs of word and of other characters
    assert Key("\n    ", False) in keys  # Enter and the indentation the editor adds: one key
    assert keys_to_type("x = f(a)\n    return x") == 8 + 1 + 8


def test_a_suggestion_the_code_goes_on_with_is_taken_whole_with_one_key():
    assert judge("total + x", "total + x\nprint(total)") == Taken("whole", 9, 1)


def test_a_correct_head_of_four_characters_or_more_is_taken_word_by_word():
    assert word_steps("total + offset(x)") == ["total", " +", " offset", "(", "x", ")"]
    assert judge("total + offset(x)", "total + offset(y)") == Taken("partial", 15, 4)  # "total + offset("
    assert judge("tot + x", "total") == Taken("wrong", 0, 0)  # no whole word of it is right
    assert judge("abc - x", "abc + x") == Taken("wrong", 0, 0)  # "abc" is right but under four characters


def test_a_region_starts_at_a_line_of_code_and_leaves_its_last_line_break_in_the_file():
    import random

    text = "".join(f"value_{i} = {i}\n" for i in range(40))
    start, end = region_in(text, random.Random(0), lines=25)
    assert text[start - 1 : start] in ("", "\n") and text[end] == "\n"
    assert text[start:end].count("\n") == 24
