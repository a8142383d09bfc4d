"""Parsing that stays linear on text made to make it backtrack: a decorator or signature followed by a
comment of dashes (36 dashes took 50 s), and a long word before the cursor."""

from __future__ import annotations

import time

import pytest

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.retrieval import query_terms

pytestmark = pytest.mark.adversarial
REGISTRY = LanguageRegistry()
BOUND_S = 0.1  # generous: a few hundred bytes parse in well under a millisecond


def definitions_of(text: str, language: str) -> dict[str, str]:
    from dgemma_lsp.repository import imports

    parse = getattr(imports, "definitions", None)
    if parse is None:  # pragma: no cover - moved to its own module
        from dgemma_lsp.repository.definitions import definitions as parse
    return parse(text, language, REGISTRY.grammar(language))


@pytest.mark.parametrize("dashes", [36, 200])
@pytest.mark.parametrize(
    "template, language, name, head",
    [
        (
            "@decorator  # {comment}\ndef build(x):\n    pass\n",
            "python",
            "build",
            "@decorator  # {comment}\ndef build(x):",
        ),
        (
            "def build(x,  # {comment}\n          y):\n    pass\n",
            "python",
            "build",
            "def build(x,  # {comment}\n          y):",
        ),
        (
            "class Box:  # {comment}\n    def open(self):  # {comment}\n        pass\n",
            "python",
            "Box",
            "class Box:\n    def open(self):",
        ),
        (
            "function build(x, // {comment}\n  y) // {comment}\n{{ return x }}\n",
            "typescript",
            "build",
            "function build(x, // {comment}\n  y)",
        ),
        ("function M.build(x) -- {comment}\n  return x\nend\n", "lua", "build", "function M.build(x)"),
    ],
)
def test_a_comment_of_dashes_parses_at_once(template, language, name, head, dashes) -> None:
    comment = "-" * dashes
    started = time.perf_counter()
    found = definitions_of(template.format(comment=comment), language)
    assert time.perf_counter() - started < BOUND_S
    assert found[name] == head.format(comment=comment)


def test_a_long_word_before_the_cursor_is_read_at_once() -> None:
    text = "blob = " + "A" * 100_000 + " + rest"  # "rest" is being typed: left out of the query
    started = time.perf_counter()
    assert query_terms(text, len(text)) == {"blob", "A" * 100_000}
    assert time.perf_counter() - started < BOUND_S
