"""Text sync and the workspace: open/change/close, LSP incremental sync in each encoding, the byte edits."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol.types import (
    Position,
    Range,
    TextDocumentContentChangePartial,
    TextDocumentContentChangeWholeDocument,
)

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.positions import InvalidPosition, LineIndex, PositionEncoding
from dgemma_lsp.documents.text_sync import Document, Edit, UnknownDocument, apply_changes, change_document
from dgemma_lsp.documents.workspace import Workspace

URI = "file:///tmp/example.py"
ENCODING = PositionEncoding.UTF16
EMOJI = "\N{GRINNING FACE}"


def partial(sl: int, sc: int, el: int, ec: int, text: str) -> TextDocumentContentChangePartial:
    return TextDocumentContentChangePartial(range=Range(Position(sl, sc), Position(el, ec)), text=text)


def test_open_get_close_and_unknown_uris():
    workspace = Workspace(LanguageRegistry(), "utf-16")
    opened = workspace.open(URI, "python", 1, "x = 1\n")
    assert workspace.get(URI) is opened
    doc = opened.document
    assert (doc.uri, doc.language_id, doc.version, doc.text) == (URI, "python", 1, "x = 1\n")
    assert opened.tree is not None and not opened.tree.has_error
    assert URI in workspace and len(workspace) == 1 and workspace.is_current(URI, 1)
    workspace.close(URI)
    assert URI not in workspace and not workspace.is_current(URI, 1)
    with pytest.raises(UnknownDocument, match=r"document not open: file:///tmp/example\.py"):
        workspace.get(URI)
    with pytest.raises(UnknownDocument):
        workspace.change(URI, 2, [partial(0, 0, 0, 0, "y")])
    with pytest.raises(UnknownDocument):
        workspace.close(URI)
    assert issubclass(UnknownDocument, LookupError)


def test_workspace_rejects_an_unknown_encoding():
    with pytest.raises(ValueError, match="unknown position encoding 'latin-1'"):
        Workspace(LanguageRegistry(), "latin-1")


def test_workspace_change_moves_text_tree_and_history_together():
    workspace = Workspace(LanguageRegistry(), "utf-16")
    opened = workspace.open(URI, "python", 1, "def f():\n    return 1\n")
    edit = workspace.change(URI, 2, [partial(1, 11, 1, 12, "total")])
    assert (edit.offset, edit.old, edit.new) == (20, "1", "total")
    assert opened.document.text == "def f():\n    return total\n" and opened.document.version == 2
    assert opened.tree is not None and not opened.tree.has_error
    assert [(e.offset, e.old, e.new) for e in opened.history.recent()] == [(20, "1", "total")]
    whole = workspace.change(URI, 3, [TextDocumentContentChangeWholeDocument(text="x = (\n")])
    assert whole is None and opened.tree.has_error  # an unclosed bracket, parsed incrementally


def test_utf16_change_after_an_emoji_gives_utf8_byte_edit():
    doc = Document(URI, "python", 1, LineIndex(f's = "{EMOJI}"\nprint(s)\n'))
    # The closing quote is utf-16 character 7 (the emoji is two units) and utf-8 byte 9.
    change = change_document(doc, 2, [partial(0, 7, 0, 8, "' + 'x'")], ENCODING)
    assert change.document.text == f"s = \"{EMOJI}' + 'x'\nprint(s)\n"
    assert change.document.version == 2
    assert change.edits == (Edit(9, 10, 16, (0, 9), (0, 10), (0, 16)),)


def test_utf8_positions_inside_a_character_round_down():
    doc = Document(URI, "python", 1, LineIndex("# \u4e2d\u6587\n"))
    # byte 3 is inside the first CJK char (bytes 2-4): the insert lands before it
    change = change_document(doc, 2, [partial(0, 3, 0, 3, "!")], PositionEncoding.UTF8)
    assert change.document.text == "# !\u4e2d\u6587\n"
    assert change.edits[0].start_byte == 2


def test_changes_apply_in_order_each_against_the_previous_text():
    doc = Document(URI, "python", 1, LineIndex("a\nb\n"))
    change = change_document(doc, 2, [partial(1, 0, 1, 1, "B\nC"), partial(2, 1, 2, 1, "!")], ENCODING)
    assert change.document.text == "a\nB\nC!\n"
    first, second = change.edits
    assert first == Edit(2, 3, 5, (1, 0), (1, 1), (2, 1))
    assert second == Edit(5, 5, 6, (2, 1), (2, 1), (2, 2))


def test_whole_document_change_replaces_everything():
    doc = Document(URI, "python", 1, LineIndex("old\ntext"))
    change = change_document(doc, 2, [TextDocumentContentChangeWholeDocument(text="new")], ENCODING)
    assert change.document.text == "new"
    assert change.edits == (Edit(0, 8, 3, (0, 0), (1, 4), (0, 3)),)


def test_ranges_past_the_end_are_clamped():
    doc = Document(URI, "python", 1, LineIndex("ab\ncd"))
    change = change_document(doc, 2, [partial(0, 9, 7, 3, "!")], ENCODING)  # line 0's end .. the end
    assert change.document.text == "ab!"
    assert change.edits[0] == Edit(2, 5, 3, (0, 2), (1, 2), (0, 3))


def test_end_before_start_is_invalid_and_leaves_the_document_alone():
    doc = Document(URI, "python", 1, LineIndex("abc\ndef\n"))
    with pytest.raises(InvalidPosition, match="before its start"):
        change_document(doc, 2, [partial(0, 0, 0, 1, "X"), partial(1, 2, 1, 1, "")], ENCODING)
    workspace = Workspace(LanguageRegistry(), ENCODING)
    workspace.open(URI, "python", 1, doc.text)
    with pytest.raises(InvalidPosition, match="before its start"):
        workspace.change(URI, 2, [partial(0, 0, 0, 1, "X"), partial(1, 2, 1, 1, "")])
    kept = workspace.get(URI)
    assert kept.document.text == "abc\ndef\n" and kept.document.version == 1 and not kept.history.recent()
    # lsprotocol refuses negative numbers itself; a duck-typed change reaches our check.
    negative = SimpleNamespace(
        range=SimpleNamespace(start=SimpleNamespace(line=0, character=-1), end=Position(0, 0)), text=""
    )
    with pytest.raises(InvalidPosition, match="character must be >= 0"):
        change_document(doc, 2, [negative], ENCODING)


def test_crlf_document_edits_use_tree_sitter_rows():
    text, edits = apply_changes("a\r\nb\r\n", [partial(1, 1, 1, 1, "\r\nc")], PositionEncoding.UTF16)
    assert text == "a\r\nb\r\nc\r\n"
    assert edits == [Edit(4, 4, 7, (1, 1), (1, 1), (2, 1))]


# -- random edit sequences against a reference -----------------------------------------------

ALPHABET = ["x", "y", " ", "\n", "\r\n", "\r", "\u00e9", "\u4e2d", EMOJI, "\N{PILE OF POO}"]
texts = st.lists(st.sampled_from(ALPHABET), max_size=12).map("".join)


def reference_offset(text: str, line: int, character: int, encoding: PositionEncoding) -> int:
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = re.compile(r"\r\n|\r|\n|$").search(text, start).start()
    units = 0
    for i, ch in enumerate(text[start:end]):
        width = {"utf-32": 1, "utf-16": 2 if ord(ch) > 0xFFFF else 1, "utf-8": len(ch.encode())}[encoding]
        if units + width > character:
            return start + i
        units += width
    return end


def reference_point(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n"), len(before[before.rfind("\n") + 1 :].encode())


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["utf-8", "utf-16", "utf-32"]),
    texts,
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 9), st.integers(0, 3), st.integers(0, 9), texts),
        min_size=1,
        max_size=8,
    ),
)
def test_random_edit_sequences_match_reference(encoding, text, steps):
    doc = Document(URI, "plaintext", 0, LineIndex(text))
    for version, (line, character, extra_lines, end_character, new) in enumerate(steps, 1):
        end = (line + extra_lines, end_character if extra_lines else max(character, end_character))
        a = reference_offset(text, line, character, encoding)
        b = reference_offset(text, *end, encoding)
        change = change_document(
            doc, version, [partial(line, character, *end, new)], PositionEncoding(encoding)
        )
        doc = change.document
        expected_edit = Edit(
            start_byte=len(text[:a].encode()),
            old_end_byte=len(text[:b].encode()),
            new_end_byte=len(text[:a].encode()) + len(new.encode()),
            start_point=reference_point(text, a),
            old_end_point=reference_point(text, b),
            new_end_point=reference_point(text[:a] + new, a + len(new)),
        )
        text = text[:a] + new + text[b:]
        assert change.document.text == text
        assert change.edits == (expected_edit,)
        assert change.document.lines.encoded == text.encode()
