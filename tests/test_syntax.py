"""Grammar registry and the incremental tree-sitter layer."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol.types import Position, Range, TextDocumentContentChangePartial

from dgemma_lsp.documents.languages import DEFAULT_SPECS, LanguageRegistry, LanguageSpec
from dgemma_lsp.documents.positions import LineIndex, PositionEncoding
from dgemma_lsp.documents.syntax import (
    SyntaxTree,
    child_spans,
    enclosing_block,
    in_comment,
    node_at,
    top_level_spans,
)
from dgemma_lsp.documents.text_sync import Document, change_document
from dgemma_lsp.documents.workspace import Workspace

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "context"
CURSOR = "<|cursor|>"
ALL = ["python", "javascript", "typescript", "tsx", "lua", "rust", "go", "c", "cpp", "java", "bash"]


@pytest.fixture(scope="module")
def registry() -> LanguageRegistry:
    return LanguageRegistry()


def test_every_default_grammar_loads(registry):
    assert registry.available() == ALL
    assert registry.errors() == {}


@pytest.mark.parametrize(
    ("language_id", "name"),
    [
        ("python", "python"),
        ("javascriptreact", "javascript"),
        ("typescriptreact", "tsx"),
        ("TypeScript", "typescript"),
        ("shellscript", "bash"),
        ("sh", "bash"),
        ("cpp", "cpp"),
        ("lua", "lua"),
    ],
)
def test_language_ids_map_to_specs(registry, language_id, name):
    spec = registry.spec(language_id)
    assert spec is not None and spec.name == name
    assert registry.grammar(language_id) is not None


@pytest.mark.parametrize(
    ("path", "name"),
    [("a/b.py", "python"), ("x.TSX", "tsx"), ("lib.h", "c"), ("k.hpp", "cpp"), ("run.sh", "bash")],
)
def test_extensions_map_to_specs(registry, path, name):
    assert registry.spec_for_path(path).name == name


def test_unknown_languages_give_none(registry):
    assert registry.spec("markdown") is None
    assert registry.grammar("markdown") is None
    assert registry.grammar(None) is None
    assert registry.spec_for_path("README") is None


def test_a_broken_grammar_is_reported_once_and_gives_none(caplog):
    broken = LanguageSpec("nope", "tree_sitter_does_not_exist", "language", ("nope",), (".nope",), r"\{$")
    registry = LanguageRegistry([*DEFAULT_SPECS, broken])
    with caplog.at_level(logging.WARNING, logger="dgemma_lsp.documents.languages"):
        assert registry.grammar("nope") is None
        assert registry.grammar("nope") is None
    assert len(caplog.records) == 1
    assert "tree_sitter_does_not_exist" in registry.errors()["nope"]
    assert "nope" not in registry.available()


# Fixtures whose code is incomplete at the cursor on purpose.
INCOMPLETE = {"c/printf_argument.c", "javascript/arrow_argument.js"}


@pytest.mark.parametrize(
    "path", sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*")), ids=str
)
def test_fixtures_parse(registry, path):
    text = (FIXTURES / path).read_text(encoding="utf-8").replace(CURSOR, "")
    spec = registry.spec_for_path(path)
    assert spec is not None and spec.name == path.split("/")[0]
    tree = SyntaxTree(registry.grammar(spec.name), text.encode())
    assert tree.has_error == (path in INCOMPLETE)


UTF16 = PositionEncoding.UTF16


def test_apply_reparses_incrementally_and_leaves_the_old_tree_alone(registry):
    doc = Document("file:///a.py", "python", 1, LineIndex("def f():\n    return 1\n"))
    tree = SyntaxTree(registry.grammar("python"), doc.lines.encoded)
    old = tree.tree
    old_sexp = str(old.root_node)
    change = change_document(
        doc,
        2,
        [TextDocumentContentChangePartial(range=Range(Position(1, 11), Position(1, 12)), text="[")],
        UTF16,
    )
    tree.apply(change.edits, change.document.lines.encoded)
    assert tree.has_error
    assert str(old.root_node) == old_sexp  # a reader holding the old tree is not disturbed
    fixed = change_document(
        change.document,
        3,
        [TextDocumentContentChangePartial(range=Range(Position(1, 12), Position(1, 12)), text="1]")],
        UTF16,
    )
    tree.apply(fixed.edits, fixed.document.lines.encoded)
    assert fixed.document.text == "def f():\n    return [1]\n"
    assert tree.sexp() == (
        "(module (function_definition name: (identifier) parameters: (parameters) "
        "body: (block (return_statement (list (integer))))))"
    )


def test_queries(registry):
    src = b"function f() {\n  // note\n  return 1;\n}\nconst x = {};\n"
    tree = SyntaxTree(registry.grammar("javascript"), src).tree
    assert node_at(tree, src.index(b"return")).type == "return"
    assert in_comment(tree, src.index(b"note"))
    assert in_comment(tree, src.index(b"note") + 4)  # at the end of a line comment
    assert not in_comment(tree, src.index(b"return"))
    block = enclosing_block(tree, src.index(b"return"), ["}"])
    assert block is not None
    assert (block.type, block.closer, block.closer_byte, block.end_byte) == ("statement_block", "}", 37, 38)
    assert enclosing_block(tree, 0, ["}"]) is None  # before the function
    assert enclosing_block(tree, src.index(b"{}") + 1, ["}"]).type == "object"
    assert top_level_spans(tree, 0, len(src)) == [(0, 38), (39, 52)]
    assert top_level_spans(tree, 40, 41) == [(39, 52)]


def test_child_spans_are_the_boundaries_at_the_level_of_the_range(registry):
    src = b"class A {\n  int a;\n  void f() {}\n  void g() {}\n}\n"
    tree = SyntaxTree(registry.grammar("java"), src).tree
    # a range across two members of the class: the members (and braces) of its body
    spans = child_spans(tree, src.index(b"void f"), src.index(b"void g") + 3)
    assert [src[a:b] for a, b in spans] == [b"void f() {}", b"void g() {}"]


def test_no_child_after_the_byte_gives_no_spans_not_a_crash(registry):
    # Node.first_child_for_byte returned a dangling node here and reading it segfaulted.
    src = "\N{GRINNING FACE}def f():{\N{GRINNING FACE}def f():\n".encode()
    tree = SyntaxTree(registry.grammar("lua"), src).tree
    assert top_level_spans(tree, len(src) - 1, len(src)) == []
    assert child_spans(tree, len(src) - 1, len(src)) == []


def test_an_unclosed_block_has_no_end_yet(registry):
    src = b"function f() {\n  \n"
    tree = SyntaxTree(registry.grammar("javascript"), src).tree
    assert enclosing_block(tree, 17, ["}"]) is None


# -- incremental trees against fresh parses ---------------------------------------------------

VALID = {
    "python": 'def f(a, b):\n    """Sum \u4e2d."""\n    return a + b  # \N{PILE OF POO}\r\n\r\nx = f(1)\n',
    "javascript": "function f(a) {\r\n  const s = '\N{GRINNING FACE}\u4e2d';\n  return s + a;\n}\nf(1);\n",
}
PIECES = [
    "x",
    "(",
    ")",
    ":",
    "{",
    "}",
    "\n",
    "\r\n",
    "  ",
    "'",
    "#",
    "\N{GRINNING FACE}",
    "\u4e2d",
    "1",
    "def ",
]
pieces = st.lists(st.sampled_from(PIECES), max_size=3).map("".join)


def _dump(tree: SyntaxTree) -> list[tuple]:
    """Every node with its bytes and points: an S-expression does not show positions."""
    out, cursor = [], tree.tree.walk()
    while True:
        node = cursor.node
        out.append(
            (node.type, node.start_byte, node.end_byte, tuple(node.start_point), tuple(node.end_point))
        )
        if cursor.goto_first_child() or cursor.goto_next_sibling():
            continue
        while cursor.goto_parent():
            if cursor.goto_next_sibling():
                break
        else:
            return out


def _lsp_range(doc, start: int, end: int, encoding: str) -> Range:
    return Range(Position(*doc.position_at(start, encoding)), Position(*doc.position_at(end, encoding)))


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(sorted(VALID)),
    st.sampled_from(["utf-8", "utf-16"]),
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 5), pieces), min_size=1, max_size=6),
)
def test_incremental_tree_equals_fresh_parse(registry, language, encoding, steps):
    """Random edits, then their inverses in reverse order: every state must parse to the same
    tree (node types, bytes and points) incrementally as from scratch."""
    grammar = registry.grammar(language)
    doc = Document("file:///x", language, 0, LineIndex(VALID[language]))
    tree = SyntaxTree(grammar, doc.lines.encoded)
    undo = []
    version = 0

    def edit(start: int, end: int, new: str) -> None:
        nonlocal doc, version
        version += 1
        old_text = doc.text[start:end]
        change = change_document(
            doc,
            version,
            [TextDocumentContentChangePartial(range=_lsp_range(doc, start, end, encoding), text=new)],
            PositionEncoding(encoding),
        )
        doc = change.document
        tree.apply(change.edits, doc.lines.encoded)
        # Compared even when the text has errors: error recovery could in principle differ
        # between an incremental and a fresh parse, but did not in 10,000 random trials.
        assert _dump(tree) == _dump(SyntaxTree(grammar, doc.lines.encoded))
        undo.append((start, start + len(new), old_text))

    for start, length, new in steps:
        start = min(start, len(doc.text))
        end = min(start + length, len(doc.text))
        # never split a "\r\n": an LSP position cannot point between its halves
        start -= doc.text[start - 1 : start + 1] == "\r\n"
        end -= doc.text[end - 1 : end + 1] == "\r\n"
        edit(start, max(start, end), new)
    for start, end, old_text in reversed(undo[:]):
        edit(start, end, old_text)
    assert doc.text == VALID[language]
    assert _dump(tree) == _dump(SyntaxTree(grammar, doc.lines.encoded))


def test_keys_typed_while_the_parser_thread_is_busy_are_parsed_together_off_the_calling_thread(registry):
    grammar = registry.grammar("python")
    doc = Document("file:///a.py", "python", 1, LineIndex("def f():\n    return 1\n"))
    with ThreadPoolExecutor(1) as parser_thread:
        busy = threading.Event()
        parser_thread.submit(busy.wait)  # still parsing another document
        tree = SyntaxTree(grammar, doc.lines.encoded, parser_thread)
        parses = [tree.pending]
        for version, (column, key) in enumerate([(12, "["), (13, "2"), (14, "]")], start=2):
            key_range = Range(Position(1, column), Position(1, column))
            change = change_document(doc, version, [TextDocumentContentChangePartial(key_range, key)], UTF16)
            doc = change.document
            tree.apply(change.edits, doc.lines.encoded)
            parses.append(tree.pending)
        assert all(p is not None and not p.done() for p in parses)  # the caller parsed nothing itself
        busy.set()
        # The first parse to run took the text as typed by then; the ones queued after it had nothing left.
        assert all(p.result() is parses[0].result() for p in parses)
        assert tree.pending is None and doc.text == "def f():\n    return 1[2]\n"
        assert tree.sexp() == SyntaxTree(grammar, doc.lines.encoded).sexp()


async def test_a_server_document_is_parsed_on_the_parser_thread_and_awaited_before_a_snapshot(registry):
    workspace = Workspace(registry, "utf-16")
    opened = workspace.open("file:///a.py", "python", 1, "def f():\n    return 1\n")
    insert = Range(Position(1, 12), Position(1, 12))
    workspace.change("file:///a.py", 2, [TextDocumentContentChangePartial(insert, " + 2")])
    await opened.parsed()
    assert opened.tree is not None and opened.tree.pending is None
    snapshot = workspace.snapshot("file:///a.py")
    fresh = SyntaxTree(registry.grammar("python"), snapshot.document.lines.encoded).tree
    assert snapshot.tree is not None and str(snapshot.tree.root_node) == str(fresh.root_node)
    assert str(snapshot.tree.root_node).count("binary_operator") == 1
