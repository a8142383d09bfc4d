"""The languages the server knows: LSP languageId / file extension -> tree-sitter grammar.

Grammars come from the PyPI grammar packages and are loaded on first use. A language the
registry does not know, or whose grammar fails to load, gives ``None``: callers then fall back
to plain-text windows and indentation heuristics.

Each ``LanguageSpec`` also carries the few syntax facts the context layer needs that the
grammar does not say directly: which line endings open a block and which tokens close one.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from tree_sitter import Language

__all__ = ["DEFAULT_SPECS", "LanguageRegistry", "LanguageSpec"]

log = logging.getLogger(__name__)

_BRACE_OPENER = r"\{\s*(//.*|/\*.*)?$"


@dataclass(frozen=True)
class LanguageSpec:
    """One language: its grammar loader, its names and its block syntax."""

    name: str  # canonical name, e.g. "tsx"
    module: str  # grammar package, e.g. "tree_sitter_typescript"
    function: str  # its loader, e.g. "language_tsx"
    language_ids: tuple[str, ...]  # LSP languageIds (VS Code ids and Neovim filetypes)
    extensions: tuple[str, ...]  # file suffixes, with the dot
    opener: str  # regex: a line (code part) matching it opens a block on the next line
    closers: tuple[str, ...] = ()  # tokens that end a block node: "}", "end", "fi"; none for python
    indent_unit: str = "    "  # one indentation level when the file itself does not show one
    opener_re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "opener_re", re.compile(self.opener))

    def opens_block(self, line: str) -> bool:
        """Does ``line`` (text before the cursor) end with a block opener?"""
        return self.opener_re.search(line) is not None


DEFAULT_SPECS: tuple[LanguageSpec, ...] = (
    LanguageSpec("python", "tree_sitter_python", "language", ("python",), (".py", ".pyi"), r":\s*(#.*)?$"),
    LanguageSpec(
        "javascript",
        "tree_sitter_javascript",
        "language",
        ("javascript", "javascriptreact", "jsx"),
        (".js", ".mjs", ".cjs", ".jsx"),
        _BRACE_OPENER,
        ("}",),
        indent_unit="  ",
    ),
    LanguageSpec(
        "typescript",
        "tree_sitter_typescript",
        "language_typescript",
        ("typescript",),
        (".ts", ".mts", ".cts"),
        _BRACE_OPENER,
        ("}",),
        indent_unit="  ",
    ),
    LanguageSpec(
        "tsx",
        "tree_sitter_typescript",
        "language_tsx",
        ("typescriptreact", "tsx"),
        (".tsx",),
        _BRACE_OPENER,
        ("}",),
        indent_unit="  ",
    ),
    LanguageSpec(
        "lua",
        "tree_sitter_lua",
        "language",
        ("lua",),
        (".lua",),
        r"(\bthen|\bdo|\belse|\brepeat|\bfunction\b[^)]*\))\s*(--.*)?$",
        ("end", "until"),
        indent_unit="  ",
    ),
    LanguageSpec("rust", "tree_sitter_rust", "language", ("rust",), (".rs",), _BRACE_OPENER, ("}",)),
    LanguageSpec("go", "tree_sitter_go", "language", ("go",), (".go",), _BRACE_OPENER, ("}",), "\t"),
    LanguageSpec("c", "tree_sitter_c", "language", ("c",), (".c", ".h"), _BRACE_OPENER, ("}",)),
    LanguageSpec(
        "cpp",
        "tree_sitter_cpp",
        "language",
        ("cpp", "c++", "cuda"),
        (".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".cu"),
        _BRACE_OPENER,
        ("}",),
    ),
    LanguageSpec("java", "tree_sitter_java", "language", ("java",), (".java",), _BRACE_OPENER, ("}",)),
    LanguageSpec(
        "bash",
        "tree_sitter_bash",
        "language",
        ("shellscript", "bash", "sh"),
        (".sh", ".bash"),
        r"(\bthen|\bdo|\belse|\{|\bin)\s*(#.*)?$",
        ("}", "fi", "done", "esac"),
        indent_unit="  ",
    ),
)


class LanguageRegistry:
    """Looks languages up by languageId, canonical name or file path; loads grammars lazily.

    The grammar cache is the only state and it only grows; a load failure is remembered (and
    logged once) so a broken grammar package costs one import attempt, not one per keystroke.
    """

    def __init__(self, specs: Iterable[LanguageSpec] = DEFAULT_SPECS) -> None:
        self._specs = tuple(specs)
        self._by_id: dict[str, LanguageSpec] = {}
        self._by_ext: dict[str, LanguageSpec] = {}
        for spec in self._specs:
            for key in (spec.name, *spec.language_ids):
                self._by_id.setdefault(key.lower(), spec)
            for ext in spec.extensions:
                self._by_ext.setdefault(ext.lower(), spec)
        self._grammars: dict[str, Language] = {}
        self._errors: dict[str, str] = {}

    def spec(self, language: str | None) -> LanguageSpec | None:
        """The spec for an LSP languageId or canonical name (case-insensitive), else None."""
        if not language:
            return None
        return self._by_id.get(language.lower())

    def spec_for_path(self, path: str | os.PathLike[str]) -> LanguageSpec | None:
        """The spec for a file, by its extension (the CLI reads files, not languageIds)."""
        _, ext = os.path.splitext(os.fspath(path))
        return self._by_ext.get(ext.lower())

    def grammar(self, language: str | None) -> Language | None:
        """The tree-sitter ``Language`` for a languageId or name; None if unknown or unloadable."""
        spec = self.spec(language)
        return None if spec is None else self._load(spec)

    def _load(self, spec: LanguageSpec) -> Language | None:
        grammar = self._grammars.get(spec.name)
        if grammar is not None or spec.name in self._errors:
            return grammar
        try:
            module = importlib.import_module(spec.module)
            grammar = Language(getattr(module, spec.function)())
        except (ImportError, AttributeError, TypeError, ValueError, OSError) as exc:
            # ValueError: the grammar's ABI is one this tree-sitter cannot read.
            self._errors[spec.name] = f"{spec.module}.{spec.function}: {exc}"
            log.warning("no grammar for %s: %s", spec.name, exc)
            return None
        self._grammars[spec.name] = grammar
        return grammar

    def names(self) -> list[str]:
        """Canonical names of all known languages."""
        return [spec.name for spec in self._specs]

    def extensions(self, languages: Iterable[str] = ()) -> frozenset[str]:
        """File suffixes (lower case, with the dot) of the languages named by id or name; all if none."""
        wanted = {self.spec(language) for language in languages}
        return frozenset(
            ext.lower() for spec in self._specs if not languages or spec in wanted for ext in spec.extensions
        )

    def language_ids(self) -> list[str]:
        """Every languageId the registry answers to."""
        return sorted({i for spec in self._specs for i in spec.language_ids})

    def available(self) -> list[str]:
        """Canonical names of the languages whose grammar loads (loads them all)."""
        return [spec.name for spec in self._specs if self._load(spec) is not None]

    def errors(self) -> dict[str, str]:
        """Why each grammar that failed to load failed (after ``available`` or ``grammar``)."""
        return dict(self._errors)
