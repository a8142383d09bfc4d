"""Tree-sitter grammars for the held-out languages, loaded once, and a parse helper.

Loaded from the PyPI grammar packages directly (not through dgemma_lsp) so that evaluation keeps
no dependency on the server.
"""

from __future__ import annotations

import functools

import tree_sitter_lua
import tree_sitter_python
import tree_sitter_typescript
from tree_sitter import Language, Parser, Tree

_LOADERS = {
    "python": tree_sitter_python.language,
    "typescript": tree_sitter_typescript.language_typescript,
    "tsx": tree_sitter_typescript.language_tsx,
    "lua": tree_sitter_lua.language,
}


def grammar_name(language: str, path: str = "") -> str:
    """The grammar for a file: TSX files need the tsx grammar, the rest go by language."""
    return "tsx" if language == "typescript" and path.endswith(".tsx") else language


@functools.cache
def parser_for(grammar: str) -> Parser:
    return Parser(Language(_LOADERS[grammar]()))


def parse(text: str, language: str, path: str = "") -> Tree:
    return parser_for(grammar_name(language, path)).parse(text.encode("utf-8"))


def parses_cleanly(text: str, language: str, path: str = "") -> bool:
    """True when the whole file parses without ERROR or MISSING nodes."""
    return not parse(text, language, path).root_node.has_error
