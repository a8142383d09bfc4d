"""Confidence filters: per-line cut of the ghost text, and the mean below which nothing is offered."""

from __future__ import annotations

from dataclasses import replace

from dgemma_lsp.inline.pipeline import confident_part
from engine import Candidate


def candidate(text: str, pieces: list[tuple[str, float]]) -> Candidate:
    offsets, at = [], 0
    for piece, _ in pieces:
        offsets.append(at)
        at += len(piece)
    assert "".join(p for p, _ in pieces) == text
    return Candidate(text=text, token_ids=tuple(range(len(pieces))), confidence=tuple(c for _, c in pieces),
                     offsets=tuple(offsets))  # fmt: skip


def test_line_confidence_is_the_lowest_token_of_each_line():
    c = candidate("a = 1\nb = 2", [("a", 0.9), (" = 1", 0.8), ("\nb", 0.3), (" = 2", 0.95)])
    assert c.line_confidence() == [0.8, 0.3]


def test_text_is_cut_before_the_first_unsure_line():
    c = candidate("a = 1\nb = 2\nc", [("a = 1", 0.9), ("\n", 0.9), ("b = 2", 0.2), ("\nc", 0.9)])
    assert confident_part(c, 0.5) == "a = 1"
    assert confident_part(c, 0.1) == c.text
    assert confident_part(c, 0.0) == c.text


def test_an_unsure_first_line_leaves_nothing():
    c = candidate("zzz", [("zzz", 0.05)])
    assert confident_part(c, 0.5) == ""


def test_a_next_token_candidate_is_also_cut_where_the_head_lost_its_way():
    # The head's draft ran out and the canvas wrote on: a token the head gives almost nothing.
    pieces = [("if a:", 0.9), ("\n    b()", 0.9), ("\n    b =pp", 0.9)]
    c = candidate("if a:\n    b()\n    b =pp", pieces)
    scored = replace(c, head_confidence=(0.2, 0.3, 0.001))
    assert confident_part(scored, 0.0, 0.01) == "if a:\n    b()"
    assert confident_part(scored, 0.0, 0.0) == scored.text
    assert confident_part(c, 0.0, 0.01) == c.text  # no head scores: the canvas's gate alone
