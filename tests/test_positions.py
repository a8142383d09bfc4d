"""LSP position <-> offset conversions, checked by hand and against a slow reference."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol.types import PositionEncodingKind

from dgemma_lsp.documents.positions import (
    InvalidPosition,
    LineIndex,
    PositionEncoding,
    column_to_index,
    index_to_column,
    split_lines,
)

U8, U16, U32 = PositionEncoding.UTF8, PositionEncoding.UTF16, PositionEncoding.UTF32

# "a", an astral emoji (2 utf-16 units, 4 utf-8 bytes), "b", a CJK char (1 unit, 3 bytes), "c"
LINE = "a\N{GRINNING FACE}b\u4e2dc"


def test_split_lines_breaks_at_lsp_line_ends_only():
    assert split_lines("") == [""]
    assert split_lines("a") == ["a"]
    assert split_lines("a\n") == ["a\n", ""]
    assert split_lines("a\r\nb\rc\nd") == ["a\r\n", "b\r", "c\n", "d"]
    assert split_lines("\r\r\n\n") == ["\r", "\r\n", "\n", ""]
    # Form feed, vertical tab and U+2028 are not line breaks in LSP (str.splitlines thinks so).
    assert split_lines("a\x0cb\u2028c\x0bd\ne") == ["a\x0cb\u2028c\x0bd\n", "e"]


@pytest.mark.parametrize(
    ("encoding", "characters", "indices"),
    [
        # utf-16: the emoji spans units 1-2; unit 2 splits the pair and rounds down to 1.
        (U16, [0, 1, 2, 3, 4, 5, 6, 99], [0, 1, 1, 2, 3, 4, 5, 5]),
        # utf-8: the emoji spans bytes 1-4, the CJK char bytes 6-8.
        (U8, [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 99], [0, 1, 1, 1, 2, 3, 3, 3, 4, 5, 5]),
        (U32, [0, 1, 2, 3, 4, 5, 99], [0, 1, 2, 3, 4, 5, 5]),
    ],
)
def test_column_to_index_rounds_down_inside_characters_and_clamps(encoding, characters, indices):
    assert [column_to_index(LINE, c, encoding) for c in characters] == indices


def test_index_to_column_in_each_encoding():
    assert [index_to_column(LINE, i, U16) for i in range(6)] == [0, 1, 3, 4, 5, 6]
    assert [index_to_column(LINE, i, U8) for i in range(6)] == [0, 1, 5, 6, 9, 10]
    assert [index_to_column(LINE, i, U32) for i in range(6)] == [0, 1, 2, 3, 4, 5]
    assert index_to_column(LINE, 50, U16) == 6


def test_negative_values_raise_invalid_position():
    assert issubclass(InvalidPosition, ValueError)
    with pytest.raises(InvalidPosition, match="character must be >= 0"):
        column_to_index("abc", -1, U16)
    index = LineIndex("abc\n")
    with pytest.raises(InvalidPosition, match="line must be >= 0"):
        index.offset_at(-1, 0, U16)
    with pytest.raises(InvalidPosition, match="offset must be >= 0"):
        index.position_at(-3, U16)


def test_position_encoding_parse_accepts_lsprotocol_kinds_and_rejects_others():
    assert PositionEncoding.parse(PositionEncodingKind.Utf8) is U8
    assert PositionEncoding.parse("utf-16") is U16
    with pytest.raises(ValueError, match="utf-8, utf-16, utf-32"):
        PositionEncoding.parse("utf-7")


def test_offsets_clamp_to_line_end_and_document_end():
    index = LineIndex("ab\r\ncd\n")
    assert index.line_count == 3
    assert index.offset_at(0, 10, U16) == 2  # before the "\r\n", not inside it
    assert index.offset_at(1, 1, U16) == 5
    assert index.offset_at(2, 0, U16) == 7  # the empty last line
    assert index.offset_at(3, 0, U16) == 7  # past the last line: end of document
    assert index.offset_at(99, 5, U8) == 7
    assert index.position_at(3, U16) == (0, 2)  # between "\r" and "\n": line end
    assert index.position_at(100, U16) == (2, 0)


def test_bytes_points_and_lone_carriage_returns():
    text = "\u4e2d\rx\n\N{GRINNING FACE}y"
    index = LineIndex(text)
    assert [index.line(r) for r in range(index.line_count)] == ["\u4e2d", "x", "\N{GRINNING FACE}y"]
    assert [index.byte_at(o) for o in range(len(text) + 1)] == [0, 3, 4, 5, 6, 10, 11]
    # tree-sitter rows start at "\n" only: "x" after a lone "\r" is still on row 0
    assert index.point_at(2) == (0, 4)
    assert index.point_at(5) == (1, 4)
    assert [index.offset_of_byte(b) for b in (0, 1, 3, 6, 7, 9, 10, 11)] == [0, 0, 1, 4, 4, 4, 5, 6]


def test_replace_shares_nothing_mutable_with_the_old_snapshot():
    old = LineIndex("one\ntwo\nthree\n")
    assert old.line_start(3) == 14
    new = old.replace(4, 7, "2\n2")
    assert new.text == "one\n2\n2\nthree\n"
    assert [new.line(r) for r in range(new.line_count)] == ["one", "2", "2", "three", ""]
    assert new.line_start(3) == 8
    assert old.text == "one\ntwo\nthree\n" and old.line_start(2) == 8
    with pytest.raises(InvalidPosition):
        old.replace(5, 4, "")


def test_replace_joins_a_lone_cr_with_a_following_lf():
    index = LineIndex("a\rb\n")
    joined = index.replace(2, 3, "")  # delete "b": "a\r" + "\n" is one "\r\n" break
    assert joined.text == "a\r\n"
    assert joined.line_count == 2 and joined.line(0) == "a"
    assert joined.point_at(3) == (1, 0)


# -- against a slow reference ----------------------------------------------------------------

ALPHABET = ["a", "b", " ", "\n", "\r\n", "\r", "\u00e9", "\u4e2d", "\N{GRINNING FACE}", "\N{PILE OF POO}"]
texts = st.lists(st.sampled_from(ALPHABET), max_size=30).map("".join)
encodings = st.sampled_from(list(PositionEncoding))


def reference_offset(text: str, line: int, character: int, encoding: PositionEncoding) -> int:
    """Walk the text character by character: the LSP rules, with no cleverness."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = re.compile(r"\r\n|\r|\n|$").search(text, start).start()
    units = 0
    for i, ch in enumerate(text[start:end]):
        width = {U32: 1, U16: 2 if ord(ch) > 0xFFFF else 1, U8: len(ch.encode())}[encoding]
        if units + width > character:
            return start + i
        units += width
    return end


@settings(max_examples=150, deadline=None)
@given(texts, encodings, st.integers(0, 12), st.integers(0, 14))
def test_offset_at_matches_reference(text, encoding, line, character):
    assert LineIndex(text).offset_at(line, character, encoding) == reference_offset(
        text, line, character, encoding
    )


@settings(max_examples=150, deadline=None)
@given(texts, encodings)
def test_position_round_trips_and_bytes_match(text, encoding):
    index = LineIndex(text)
    for offset in range(len(text) + 1):
        assert index.byte_at(offset) == len(text[:offset].encode())
        if text[offset - 1 : offset + 1] == "\r\n":
            continue  # inside a line break: not a position
        line, character = index.position_at(offset, encoding)
        assert index.offset_at(line, character, encoding) == offset


@settings(max_examples=150, deadline=None)
@given(texts, st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6), texts), max_size=6))
def test_replace_matches_a_fresh_index(text, edits):
    index = LineIndex(text)
    index.encoded  # noqa: B018 - cached bytes must be spliced along
    for start, length, new in edits:
        start = min(start, len(text))
        end = min(start + length, len(text))
        text = text[:start] + new + text[end:]
        index = index.replace(start, end, new)
        fresh = LineIndex(text)
        assert index.text == text
        assert index.encoded == text.encode()
        rows = range(fresh.line_count)
        assert index.line_count == fresh.line_count
        assert [index.line_with_break(r) for r in rows] == [fresh.line_with_break(r) for r in rows]
        assert [index.line_start_byte(r) for r in rows] == [fresh.line_start_byte(r) for r in rows]
        assert [index.point_at(o) for o in range(len(text) + 1)] == [
            (text.count("\n", 0, o), len(text[text.rfind("\n", 0, o) + 1 : o].encode()))
            for o in range(len(text) + 1)
        ]
