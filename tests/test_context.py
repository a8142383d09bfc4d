"""build_context: windows, anchors, mode and stop, per fixture and on generated files."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.positions import InvalidPosition, LineIndex
from dgemma_lsp.documents.syntax import SyntaxTree
from dgemma_lsp.inline.context import CompletionContext, ContextOptions, Stop, build_context

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "context"
CURSOR = "<|cursor|>"
_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Words and punctuation marks: additive over lines, like a BPE tokenizer roughly is."""
    return len(_TOKEN.findall(text))


@pytest.fixture(scope="module")
def registry() -> LanguageRegistry:
    return LanguageRegistry()


def load(path: str) -> tuple[str, int]:
    source = (FIXTURES / path).read_text(encoding="utf-8")
    assert source.count(CURSOR) == 1, path
    return source.replace(CURSOR, ""), source.index(CURSOR)


def context_for(registry, path: str, *, with_tree: bool = True, **kwargs) -> CompletionContext:
    text, cursor = load(path)
    spec = registry.spec_for_path(path)
    tree = SyntaxTree(registry.grammar(spec.name), text.encode()) if with_tree else None
    return build_context(text, cursor, count_tokens=count_tokens, spec=spec, tree=tree, **kwargs)


# path: (mode, min_indent, closing_text, scope node type)
EXPECTED = {
    "python/function_body.py": ("block", 4, None, None),
    "python/method_statements.py": ("single_line", 8, None, None),
    "python/call_arguments.py": ("single_line", 8, None, None),
    "javascript/function_body.js": ("block", 2, "}", "statement_block"),
    "javascript/arrow_argument.js": ("single_line", 0, None, None),
    "typescript/method_statements.ts": ("multi_line", 4, "}", "statement_block"),
    "typescript/interface_body.ts": ("block", 2, "}", "interface_body"),
    "tsx/component_body.tsx": ("block", 2, "}", "statement_block"),
    "tsx/jsx_children.tsx": ("multi_line", 6, "}", "statement_block"),
    "lua/function_body.lua": ("block", 2, "end", "function_declaration"),
    "lua/call_argument.lua": ("single_line", 2, "end", "function_declaration"),
    "rust/function_body.rs": ("block", 4, "}", "block"),
    "rust/match_arms.rs": ("multi_line", 8, "}", "match_block"),
    "go/method_body.go": ("block", 1, "}", "block"),
    "go/loop_statements.go": ("multi_line", 2, "}", "block"),
    "c/function_body.c": ("block", 4, "}", "compound_statement"),
    "c/printf_argument.c": ("single_line", 4, "}", "compound_statement"),
    "cpp/loop_block.cpp": ("block", 8, "}", "compound_statement"),
    "cpp/class_members.cpp": ("multi_line", 4, "}", "field_declaration_list"),
    "java/method_body.java": ("block", 8, "}", "block"),
    "java/line_comment.java": ("single_line", 8, "}", "block"),
    "bash/if_then.sh": ("block", 2, "fi", "if_statement"),
    "bash/loop_body.sh": ("multi_line", 2, "done", "do_group"),
}


def test_every_fixture_has_an_expectation():
    on_disk = {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*")}
    assert on_disk == set(EXPECTED)
    assert {p.split("/")[0] for p in on_disk} == {
        "python", "javascript", "typescript", "tsx", "lua", "rust", "go", "c", "cpp", "java", "bash"
    }  # fmt: skip


@pytest.mark.parametrize("path", sorted(EXPECTED), ids=str)
def test_fixture_mode_and_stop(registry, path):
    mode, min_indent, closing, scope = EXPECTED[path]
    ctx = context_for(registry, path)
    text, cursor = load(path)
    assert (ctx.mode, ctx.stop.min_indent, ctx.stop.closing_text, ctx.scope) == (
        mode,
        min_indent,
        closing,
        scope,
    )
    assert ctx.max_lines == {"single_line": 1, "multi_line": 8, "block": 32}[mode]
    if closing is not None:
        # block_end is just after the closing token, which follows the cursor
        assert text[: ctx.stop.block_end].endswith(closing)
        assert ctx.stop.block_end > cursor
    else:
        assert ctx.stop.block_end is None
    # Small files fit the default budgets whole.
    assert (ctx.prefix_start, ctx.suffix_end) == (0, len(text))
    assert ctx.prefix + ctx.suffix == text
    assert ctx.prefix_tokens == count_tokens(ctx.prefix) and ctx.suffix_tokens == count_tokens(ctx.suffix)
    line_start = text.rfind("\n", 0, cursor) + 1
    line_end = text.find("\n", cursor)
    assert ctx.line_prefix == text[line_start:cursor]
    assert ctx.line_suffix == text[cursor:line_end]
    assert ctx.language == path.split("/")[0]


@pytest.mark.parametrize(
    ("path", "mode"),
    [
        ("python/function_body.py", "block"),
        ("python/method_statements.py", "single_line"),
        ("python/call_arguments.py", "single_line"),
        ("javascript/function_body.js", "block"),
        ("lua/function_body.lua", "block"),
        ("bash/loop_body.sh", "multi_line"),
        ("go/method_body.go", "block"),
    ],
)
def test_without_a_tree_the_heuristics_agree(registry, path, mode):
    ctx = context_for(registry, path, with_tree=False)
    assert ctx.mode == mode
    assert ctx.scope is None and ctx.stop.closing_text is None


def test_unknown_language_uses_bracket_heuristics():
    text = "section {\n  \n}\n"
    ctx = build_context(text, 12, count_tokens=count_tokens, language_id="conf")
    assert ctx.language == "conf"
    assert (ctx.mode, ctx.stop) == ("block", Stop(min_indent=2))
    ctx = build_context("a = 1\nb = ", 10, count_tokens=count_tokens)
    assert (ctx.language, ctx.mode, ctx.line_prefix) == (None, "single_line", "b = ")


@pytest.mark.parametrize(
    ("text", "mode", "min_indent"),
    [
        ("def f():<|cursor|>\n", "block", 4),  # end of an opener line, no body yet
        ("def f():<|cursor|>\n    return 1\n", "multi_line", 4),  # the body exists already
        ("x = [<|cursor|>\n", "multi_line", 0),  # an open bracket at the end of the line
        ('x = f(")", <|cursor|>\n', "multi_line", 0),  # a bracket in a string does not close it
        ("x = f(<|cursor|>)\n", "single_line", 0),  # only closers after the cursor
        ("x = 1  # a comm<|cursor|>\n", "single_line", 0),  # in a comment
        ("<|cursor|>", "block", 0),  # empty file
        ("if x:\n    pass\n<|cursor|>\n", "multi_line", 0),
        ("class A:\n    def f(self):\n        pass\n\n    <|cursor|>\n", "multi_line", 4),
        # A gap between statements, or before a body that already exists: one line at a time.
        ("def f():\n    a = 1\n    <|cursor|>\n    return a\n", "single_line", 4),
        ("def f():\n<|cursor|>\n    return 1\n", "single_line", 4),
        ("x = 1\n<|cursor|>\ny = 2\n", "single_line", 0),
        # The end of a body: the code after the cursor is indented less.
        ("def f():\n    a = 1\n    <|cursor|>\nx = f()\n", "multi_line", 4),
    ],
)
def test_python_mode_rules(registry, text, mode, min_indent):
    cursor = text.index(CURSOR)
    text = text.replace(CURSOR, "")
    tree = SyntaxTree(registry.grammar("python"), text.encode())
    ctx = build_context(text, cursor, count_tokens=count_tokens, spec=registry.spec("python"), tree=tree)
    assert (ctx.mode, ctx.stop.min_indent) == (mode, min_indent)
    assert ctx.stop.open_brackets == (1 if text.startswith(("x = [", 'x = f(")"')) else 0)


def test_same_line_braces_and_an_unindented_blank_line_in_a_block(registry):
    spec, grammar = registry.spec("javascript"), registry.grammar("javascript")
    text = "function f() {}\n"
    ctx = build_context(
        text, 14, count_tokens=count_tokens, spec=spec, tree=SyntaxTree(grammar, text.encode())
    )
    assert (ctx.mode, ctx.stop) == ("block", Stop(2, "}", 15))
    text = "function f() {\n  a();\n\n  b();\n}\n"
    cursor = text.index("\n\n") + 1
    ctx = build_context(
        text, cursor, count_tokens=count_tokens, spec=spec, tree=SyntaxTree(grammar, text.encode())
    )
    assert (ctx.mode, ctx.stop.min_indent) == ("single_line", 2)
    text = "function f() {\n  a();\n  \n}\n"
    cursor = text.index("  \n") + 2
    ctx = build_context(
        text, cursor, count_tokens=count_tokens, spec=spec, tree=SyntaxTree(grammar, text.encode())
    )
    assert (ctx.mode, ctx.stop.min_indent) == ("multi_line", 2)


def test_the_indent_unit_counts_whole_block_headers_not_hanging_lines(registry):
    # Arguments hang by 2 and `} else {` closes one block as it opens the next; blocks indent by 4.
    spec, grammar = registry.spec("javascript"), registry.grammar("javascript")
    text = (
        "function f(\n  a,\n  b,\n) {\n    if (a) {\n        return b;\n    } else {\n        return a;\n"
        "    }\n}\n\nfunction g() {\n}\n"
    )
    cursor = text.index("function g() {") + len("function g() {")
    ctx = build_context(
        text, cursor, count_tokens=count_tokens, spec=spec, tree=SyntaxTree(grammar, text.encode())
    )
    assert (ctx.indent_unit, ctx.mode, ctx.stop.min_indent) == ("    ", "block", 4)


def test_crlf_lines_and_cursor_clamping():
    text = "a = 1\r\nb = 2\r\n"
    ctx = build_context(text, 6, count_tokens=count_tokens)  # between "\r" and "\n"
    assert (ctx.cursor, ctx.line, ctx.column, ctx.line_suffix) == (5, 0, 5, "")
    assert ctx.suffix == "\r\nb = 2\r\n"
    ctx = build_context(text, 999, count_tokens=count_tokens)
    assert (ctx.cursor, ctx.line, ctx.column) == (len(text), 2, 0)
    with pytest.raises(InvalidPosition):
        build_context(text, -1, count_tokens=count_tokens)


def test_options_are_validated():
    with pytest.raises(ValueError, match="prefix_tokens"):
        ContextOptions(prefix_tokens=0)
    with pytest.raises(ValueError, match="anchor_slack"):
        ContextOptions(anchor_slack=0.5)
    with pytest.raises(ValueError, match="max_lines lacks"):
        ContextOptions(max_lines={"single_line": 1})


# -- windows on a larger file ----------------------------------------------------------------

FUNC = "def func_{i}(a, b):\n    x = a + b\n    if x > {i}:\n        return x * 2\n    return x\n\n\n"
BIG = "".join(FUNC.format(i=i) for i in range(40))  # 280 lines, 26 tokens per function
SMALL = ContextOptions(prefix_tokens=100, suffix_tokens=40)


def big_cursor(text: str = BIG) -> int:
    """End of `return x * 2` in func_20."""
    return text.index("return x * 2", text.index("def func_20")) + len("return x * 2")


def python(registry, text: str, cursor: int, **kwargs) -> CompletionContext:
    tree = SyntaxTree(registry.grammar("python"), text.encode())
    return build_context(
        text,
        cursor,
        count_tokens=count_tokens,
        spec=registry.spec("python"),
        tree=tree,
        options=SMALL,
        **kwargs,
    )


def test_fresh_windows_start_and_end_at_definitions_when_the_budget_allows(registry):
    ctx = python(registry, BIG, big_cursor())
    # 100 tokens reach back into func_16; the window moves down to the def of func_17.
    assert ctx.prefix.startswith("def func_17(a, b):\n")
    assert ctx.prefix_tokens == 94
    # 40 tokens reach into func_22; the suffix stops after the last line of func_21.
    assert ctx.suffix.endswith("    return x\n") and "func_21" in ctx.suffix and "func_22" not in ctx.suffix
    assert ctx.suffix_tokens == 26
    assert not ctx.prefix_reused and not ctx.suffix_reused


def test_without_a_tree_windows_are_plain_lines_by_budget():
    cursor = big_cursor()
    ctx = build_context(BIG, cursor, count_tokens=count_tokens, options=SMALL)
    assert ctx.prefix.startswith("        return x * 2\n    return x\n\n\ndef func_17")
    assert ctx.prefix_tokens == 100
    assert ctx.suffix.endswith("    x = a + b\n") and ctx.suffix_tokens == 39
    assert BIG[ctx.prefix_start - 1] == "\n" and BIG[ctx.suffix_end - 1] == "\n"


def test_a_line_longer_than_the_budget_is_cut_inside_the_line():
    text = "x = [" + ", ".join(str(i) for i in range(300)) + "]\n"
    cursor = text.index("250")
    ctx = build_context(text, cursor, count_tokens=count_tokens, options=SMALL)
    assert 0 < ctx.prefix_start < cursor and ctx.prefix_tokens <= 100
    assert ctx.suffix_tokens <= 40 and ctx.suffix_end < len(text)


def type_at_cursor(text: str, cursor: int, typed: str) -> tuple[str, int]:
    return text[:cursor] + typed + text[cursor:], cursor + len(typed)


def test_typing_keeps_both_windows_put_until_the_prefix_outgrows_its_slack(registry):
    text, cursor = BIG, big_cursor()
    ctx = python(registry, text, cursor)
    start, suffix = ctx.prefix_start, ctx.suffix
    for step in range(1, 9):
        text, cursor = type_at_cursor(text, cursor, " + 1")
        previous, ctx = ctx, python(registry, text, cursor, anchor=ctx.anchor)
        assert ctx.prefix_reused and ctx.suffix_reused
        assert ctx.prefix_start == start and ctx.suffix == suffix
        assert ctx.prefix.startswith(previous.prefix)  # the prompt only grows at its end
        assert ctx.prefix_tokens == 94 + 2 * step
    # Typing on past 125 tokens (budget 100 * slack 1.25) re-anchors to a window within budget.
    while ctx.prefix_reused:
        text, cursor = type_at_cursor(text, cursor, " + 1")
        ctx = python(registry, text, cursor, anchor=ctx.anchor)
    assert ctx.prefix_tokens <= 100 and ctx.prefix_start > start
    assert text[ctx.prefix_start - 1] == "\n"
    assert ctx.suffix_reused and ctx.suffix == suffix


def test_pressing_enter_keeps_the_windows(registry):
    text, cursor = BIG, big_cursor()
    ctx = python(registry, text, cursor)
    text, cursor = type_at_cursor(text, cursor, "\n        ")
    after = python(registry, text, cursor, anchor=ctx.anchor)
    assert after.prefix_reused and after.suffix_reused
    assert after.prefix == ctx.prefix + "\n        " and after.suffix == ctx.suffix


def test_an_edit_above_the_window_shifts_the_anchor_instead_of_breaking_it(registry):
    text, cursor = BIG, big_cursor()
    ctx = python(registry, text, cursor)
    inserted = "import os\n"
    shifted = python(registry, inserted + text, cursor + len(inserted), anchor=ctx.anchor)
    assert shifted.prefix_reused and shifted.suffix_reused
    assert shifted.prefix_start == ctx.prefix_start + len(inserted)
    assert (shifted.prefix, shifted.suffix) == (ctx.prefix, ctx.suffix)


def test_an_edit_that_would_leave_a_stale_anchor_mid_line_re_anchors(registry):
    text, cursor = BIG, big_cursor()
    ctx = python(registry, text, cursor)
    # Above the window and below it at once: neither the offset nor the distance from the
    # end still points at the old start; the old offset is now inside "    return x".
    top = "x = 1\n" + text.replace("def func_39", "def func_xxx39")
    assert top[ctx.prefix_start - 1 : ctx.prefix_start + 1] == "rn"
    moved = python(registry, top, cursor + 6, anchor=ctx.anchor)
    assert not moved.prefix_reused
    assert top[moved.prefix_start - 1] == "\n" and moved.prefix.startswith("def func_17")


def test_an_edit_to_the_first_window_line_re_anchors(registry):
    text, cursor = BIG, big_cursor()
    ctx = python(registry, text, cursor)
    edited = text.replace("def func_17(a, b)", "def func_17(a, c)")
    after = python(registry, edited, cursor, anchor=ctx.anchor)
    assert not after.prefix_reused and after.prefix.startswith("def func_17(a, c)")


def test_moving_the_cursor_far_away_re_anchors(registry):
    ctx = python(registry, BIG, big_cursor())
    far = BIG.index("return x * 2", BIG.index("def func_35")) + len("return x * 2")
    moved = python(registry, BIG, far, anchor=ctx.anchor)
    assert not moved.prefix_reused and not moved.suffix_reused
    assert moved.prefix.startswith("def func_32") and moved.prefix_tokens <= 100
    # ... and moving up above the window too
    up = python(registry, BIG, BIG.index("def func_3"), anchor=ctx.anchor)
    assert not up.prefix_reused and up.prefix_start < ctx.prefix_start


def test_a_line_index_and_a_string_give_the_same_context(registry):
    cursor = big_cursor()
    spec, tree = registry.spec("python"), SyntaxTree(registry.grammar("python"), BIG.encode())
    a = build_context(BIG, cursor, count_tokens=count_tokens, spec=spec, tree=tree, options=SMALL)
    b = build_context(
        LineIndex(BIG), cursor, count_tokens=count_tokens, spec=spec, tree=tree.tree, options=SMALL
    )
    assert a == b
    assert replace(a, mode="block") != b


# -- any input: invariants hold and nothing raises --------------------------------------------

PIECES = [
    "def f():",
    "{",
    "}",
    "(",
    ")",
    "\n",
    "\r\n",
    "    ",
    "\t",
    "x = 1",
    "# c",
    "end",
    "\N{GRINNING FACE}",
    "\u4e2d",
]
snippets = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


def check_invariants(ctx: CompletionContext, text: str, options: ContextOptions) -> None:
    assert (
        text[ctx.prefix_start : ctx.cursor] == ctx.prefix and text[ctx.cursor : ctx.suffix_end] == ctx.suffix
    )
    assert ctx.prefix_tokens == count_tokens(ctx.prefix) and ctx.suffix_tokens == count_tokens(ctx.suffix)
    limit = options.anchor_slack if ctx.prefix_reused else 1
    assert ctx.prefix_tokens <= options.prefix_tokens * limit
    assert ctx.suffix_tokens <= options.suffix_tokens * (options.anchor_slack if ctx.suffix_reused else 1)
    line_start = ctx.cursor - ctx.column
    if ctx.prefix_start < line_start:  # not cut inside the cursor line: starts at a line start
        assert ctx.prefix_start == 0 or text[ctx.prefix_start - 1] in "\r\n"
    assert ctx.mode in ("single_line", "multi_line", "block") and ctx.stop.min_indent >= 0


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["python", "javascript", "lua", "bash", None]),
    snippets,
    st.integers(0, 400),
    snippets,
    st.integers(0, 400),
)
def test_any_text_any_cursor_any_previous_anchor(registry, language, text, cursor, inserted, where):
    options = ContextOptions(prefix_tokens=12, suffix_tokens=6)
    spec = registry.spec(language)

    def build(text: str, cursor: int, anchor=None) -> CompletionContext:
        tree = SyntaxTree(registry.grammar(language), text.encode()) if spec else None
        ctx = build_context(
            text, cursor, count_tokens=count_tokens, spec=spec, tree=tree, options=options, anchor=anchor
        )
        check_invariants(ctx, text, options)
        return ctx

    first = build(text, cursor)
    where = min(where, len(text))
    edited = text[:where] + inserted + text[where:]
    build(edited, min(cursor, len(text)) + (len(inserted) if where <= cursor else 0), first.anchor)
