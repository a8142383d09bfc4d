"""Post-processing of model text: scope, loops, suffix repeats, brackets, empties."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dgemma_lsp.inline.postprocess import (
    Shape,
    balance_brackets,
    cut_repeated_line,
    cut_suffix_repeat,
    finish_statement,
    is_looping,
    keep_to_scope,
    open_brackets,
    postprocess,
    repeats_line_above,
)


def single(line_suffix: str = "", suffix: str | None = None) -> Shape:
    return Shape(
        multi_line=False, max_lines=1, min_indent=None, line_suffix=line_suffix, suffix=suffix or line_suffix
    )


def multi(suffix: str = "", min_indent: int | None = 4, max_lines: int = 8, line_prefix: str = "") -> Shape:
    return Shape(
        multi_line=True, max_lines=max_lines, min_indent=min_indent, line_suffix="", suffix=suffix,
        line_prefix=line_prefix,
    )  # fmt: skip


def test_single_line_keeps_the_first_line():
    assert keep_to_scope("x = 1\ny = 2", single()) == "x = 1"


def test_multi_line_stops_when_a_line_leaves_the_block():
    text = "if x:\n        y()\n    z()\nw()\n"
    assert keep_to_scope(text, multi(min_indent=4)) == "if x:\n        y()\n    z()"


def test_multi_line_respects_max_lines():
    assert keep_to_scope("a\n    b\n    c\n    d", multi(max_lines=2)) == "a\n    b"


def test_cut_the_rest_of_the_line_the_suffix_already_has():
    assert cut_suffix_repeat("foo(bar))", single(line_suffix=")")) == "foo(bar)"
    assert cut_suffix_repeat("value = compute(x)", single(line_suffix="compute(x)")) == "value = "


def test_a_one_line_completion_ends_where_it_starts_writing_the_rest_of_the_line():
    # Held-out Python: `def read(self, size: <cursor> = ..., /) -> AnyStr_co: ...`, and a draft copied
    # from a line alike that goes on past the rest of this one.
    shape = single(line_suffix=" = ..., /) -> AnyStr_co: ...")
    assert cut_suffix_repeat("int | None = ..., /) -> bytes: ...", shape) == "int | None"
    shape = single(line_suffix=".wait_writable(self._fd)")
    assert cut_suffix_repeat("trio.lowlevel.wait_readable(self._fd)", shape) == "trio.lowlevel"
    # Fewer than four characters of it are chance, not the line's rest written again.
    assert cut_suffix_repeat("f(a).x + 1", single(line_suffix=").y")) == "f(a).x + 1"


def test_a_one_line_completion_does_not_end_its_statement_when_the_line_does():
    # Held-out Python: `if <cursor> is not self:` and a draft that ended its own `if` line.
    assert cut_suffix_repeat("token.redeemed:", single(line_suffix=" is not self:")) == "token.redeemed"
    assert cut_suffix_repeat("f(a, b));", single(line_suffix=" + 1);")) == "f(a, b)"
    assert cut_suffix_repeat("total", single(line_suffix=" + 1;")) == "total"


def test_a_single_shared_letter_is_not_a_repeat():
    assert cut_suffix_repeat("result", single(line_suffix="t")) == "result"


def test_multi_line_stops_before_the_code_that_follows():
    suffix = "\n    return total\n"
    text = "total = 0\n    for v in values:\n        total += v\n    return total"
    assert (
        cut_suffix_repeat(text, multi(suffix=suffix)) == "total = 0\n    for v in values:\n        total += v"
    )
    # On a blank line, a completion that only writes the line below again is none (SantaCoder-FIM:
    # 14 rows, none right); after code on the cursor's line, its first line is that line's end.
    assert postprocess("    return total", multi(suffix=suffix, line_prefix="")) is None
    after_code = multi(suffix=suffix, line_prefix="    if done: ")
    assert cut_suffix_repeat("return total", after_code) == "return total"
    # The same for one line on a blank line (a gap between statements completes one line).
    assert postprocess("    return total", single(suffix=suffix)) is None
    assert postprocess("    total = 0", single(suffix=suffix)) == "    total = 0"


def test_brackets_the_completion_opened_are_closed():
    assert balance_brackets("print(len(x", single()) == "print(len(x))"


def test_a_closer_the_suffix_already_has_is_not_written_twice():
    # The prefix opened "(", the suffix closes it: the completion must not close it too.
    assert balance_brackets("a, b)", single(line_suffix=")")) == "a, b"


def test_a_bracket_the_completion_opened_is_closed_before_the_suffix_closes_the_prefix_one():
    # Held-out Python, `list[<cursor>]`: the "]" after the cursor is list's, so the completion's "["
    # needs its own.
    shape = replace(single(line_suffix="]"), line_prefix="        list[")
    assert balance_brackets("trio.SSLListener[SocketStream", shape) == "trio.SSLListener[SocketStream]"
    assert balance_brackets("f(g(x", replace(single(line_suffix="))"), line_prefix="y = (")) == "f(g(x)"
    # Nothing open before the cursor on its line: the suffix's closer is the completion's.
    assert balance_brackets("f(x", single(line_suffix=")")) == "f(x"
    # A line that ends by opening a bracket goes on below: nothing to close yet.
    assert balance_brackets("getValues = () => {", single()) == "getValues = () => {"
    assert balance_brackets("from trio._core import (", single()) == "from trio._core import ("


def test_brackets_inside_strings_do_not_count():
    assert balance_brackets("print('(')", single()) == "print('(')"
    assert open_brackets("f(a, [1, 2") == 2 and open_brackets("x = ')' + g()") == 0
    assert open_brackets("a)") == -1


def test_empty_and_whitespace_results_are_dropped():
    assert postprocess("   \n  ", single()) is None
    assert postprocess("", multi()) is None


def test_postprocess_runs_every_step():
    assert postprocess("len(items))\nmore", single(line_suffix=")")) == "len(items)"


def test_control_characters_and_broken_bytes_end_the_completion():
    assert postprocess("total = 1\x02junk", single()) == "total = 1"
    assert postprocess("name\ufffd", single()) == "name"
    # At the very start broken bytes can only be stray pieces of a character: dropped, the rest kept.
    assert postprocess("\ufffd\ufffdvalue = 1\ufffdx", single()) == "value = 1"
    assert postprocess("\x0c", single()) is None
    assert postprocess("a\tb", single()) == "a\tb"  # tabs are code


def test_a_completion_that_went_round_a_loop_is_not_offered():
    # What the bundled model wrote on the held-out and SantaCoder rows (none of them close to right).
    for looped in (
        "namenamenamenamenamenamename",
        "i = i * i * i * i * i * i * i * i * i",
        "process(f1, f2, f2, f2, f2, f2, f2)",
        "_Executor, _Executor, _Executor, _Executor, _Executor",
    ):
        assert is_looping(looped), looped
        assert postprocess(looped, multi(min_indent=0)) is None
    # Repetition that code is made of: no word in the repeated piece, or only literals, or too short.
    for code in (
        "[0, 0, 0, 0, 0, 0, 0, 0]",
        "b'\\x00\\x00\\x00\\x00\\x00\\x00'",
        "0x00, 0x00, 0x00, 0x00, 0x00",
        "mask = 0xffffffffffffffff",
        "# " + "=" * 40,
        "return None, None, None, None, None",
        "local a, b, c, d = nil, nil, nil, nil",
        "f(x)(x)(x)(x)",
        "self.a = a\nself.b = b\nself.c = c",
        "      end\n    end\n  end\nend",
    ):
        assert not is_looping(code), code
    assert postprocess("[0, 0, 0, 0, 0, 0, 0, 0]", single()) == "[0, 0, 0, 0, 0, 0, 0, 0]"


def test_a_line_that_repeats_the_one_before_ends_the_completion_before_it():
    # SantaCoder-FIM's collatz row: the first line was the one wanted, then the model went round.
    line = "current_num = current_num // 2"
    looped = "\n".join([line] + ["            " + line] * 3 + ["            "])
    assert postprocess(looped, multi(min_indent=12, line_prefix="            ")) == line
    shape = multi(min_indent=0, line_prefix="    ")
    loop = "for x in xs:\n        f(x)\n        f(x)\n    g()"
    assert cut_repeated_line(loop, shape) == "for x in xs:\n        f(x)"
    # Indentation counts (each end closes its own block); lines without a word may repeat.
    for code in ("end\n  end\nend", "0, 0, 0,\n    0, 0, 0,", "}\n    }", "x = 1\n    y = 1\n    x = 1"):
        assert cut_repeated_line(code, shape) == code, code


def test_a_completion_that_finishes_the_statement_open_at_the_cursor_ends_there():
    # Held-out Python: after `def __str__(self` the line to finish was "self):", not the body too.
    shape = replace(multi(min_indent=4), open_brackets=1)
    finished = postprocess('self):\n        return f"{self.name}"\n', shape)
    assert finished == "self):"
    # Arguments over several lines are still one statement; brackets in strings do not count.
    args = "\n    1,\n    ')',\n    f(2),\n)\nprint(x)"
    assert finish_statement(args, shape) == "\n    1,\n    ')',\n    f(2),\n)"
    assert finish_statement("a,\n    b", shape) == "a,\n    b"  # not closed yet: nothing to cut
    assert finish_statement(args, multi(min_indent=4)) == args  # no bracket open at the cursor


def test_a_blank_line_that_writes_the_line_above_again_is_none():
    # SantaCoder-FIM: 16 completions on a blank line repeated the line above, none of them right.
    shape = replace(single(), line_above="    count += 1")
    assert postprocess("    count += 1", shape) is None
    assert postprocess("    count += 2", shape) == "    count += 2"
    assert postprocess("        count += 1", shape) == "        count += 1"  # a line deeper: not a repeat
    assert postprocess("    }", replace(single(), line_above="    }")) == "    }"  # no word: closers repeat
    after_code = replace(single(), line_prefix="    count ", line_above="    count += 1")
    assert not repeats_line_above("+= 1", after_code.line_prefix, after_code.line_above)


@pytest.mark.parametrize(
    ("text", "line_suffix", "expected"),
    [
        # Inserted before `variance(values) ** 0.5`, `... / len` would make `lenvariance(...)`.
        ("sum(values) / len", "variance(values) ** 0.5", "sum(values) / "),
        ("len", "n // 2", None),  # `lenn`: nothing of it fits
        ("foo(x)", "bar", "foo(x)"),  # ends with a bracket: nothing glues
        ("foo", " + bar", "foo"),  # a space between: nothing glues
    ],
)
def test_a_completion_never_runs_into_the_word_after_the_cursor(text, line_suffix, expected):
    shape = Shape(multi_line=False, max_lines=1, min_indent=None, line_suffix=line_suffix, suffix=line_suffix)
    assert postprocess(text, shape) == expected
