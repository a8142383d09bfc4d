"""What a file imports from the workspace, by tree-sitter (what the imported files define: definitions.py).

- `imports_of`: the import statements of a document (Python `import` / `from ... import`, TypeScript
  and JavaScript `import ... from` and `require`, Lua `require`), as modules and the names taken;
- `resolve`: the indexed file a module names (relative to the importing file, or by its path's tail,
  the nearest to the importer first).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Node

from dgemma_lsp.repository.files import COMPILED_SUFFIXES, JAVASCRIPT_SUFFIXES, TYPESCRIPT_SUFFIXES
from dgemma_lsp.repository.index import IndexedFile, RepositoryIndex

SCRIPT_LANGUAGES = frozenset({"typescript", "tsx", "javascript"})
_SCRIPT_SUFFIXES = (*TYPESCRIPT_SUFFIXES, *COMPILED_SUFFIXES)  # what `./x` may name, in this order


@dataclass(frozen=True)
class Import:
    module: str  # as written: "a.b", ".x" (Python), "./x" (TypeScript), "a.b" (Lua)
    names: tuple[str, ...] = ()  # names taken from it; none: the module as a whole
    alias: str = ""  # the module's local name, for `alias.name` uses


def imports_of(root: Node, source: bytes, language: str) -> list[Import]:
    """The document's imports, in order."""
    if language == "python":
        return [i for node in root.children for i in _python_imports(node, source)]
    if language in SCRIPT_LANGUAGES:
        return [i for node in root.children for i in _ts_imports(node, source)]
    if language == "lua":
        return _lua_requires(root, source)
    return []


def node_text(node: Node | None, source: bytes) -> str:
    return "" if node is None else source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _python_imports(node: Node, source: bytes) -> list[Import]:
    if node.type == "import_statement":
        found = []
        for name in node.children_by_field_name("name"):
            if name.type == "aliased_import":
                module = node_text(name.child_by_field_name("name"), source)
                found.append(Import(module, alias=node_text(name.child_by_field_name("alias"), source)))
            else:
                module = node_text(name, source)
                found.append(Import(module, alias=module))
        return found
    if node.type == "import_from_statement":
        module = node_text(node.child_by_field_name("module_name"), source)
        names = []
        for name in node.children_by_field_name("name"):
            inner = name.child_by_field_name("name") if name.type == "aliased_import" else name
            names.append(node_text(inner, source))
        return [Import(module, tuple(names))] if names else []
    return []


def _ts_imports(node: Node, source: bytes) -> list[Import]:
    if node.type == "import_statement":
        module = _string(node.child_by_field_name("source"), source)
        names, alias = [], ""
        for clause in (c for c in node.children if c.type == "import_clause"):
            for part in clause.children:
                if part.type == "identifier":
                    names.append("default")
                elif part.type == "namespace_import":
                    alias = node_text(
                        next((c for c in part.children if c.type == "identifier"), None), source
                    )
                elif part.type == "named_imports":
                    for spec in (c for c in part.children if c.type == "import_specifier"):
                        names.append(node_text(spec.child_by_field_name("name"), source))
        return [Import(module, tuple(names), alias)] if module else []
    if node.type in ("lexical_declaration", "variable_declaration"):
        found = []
        for declarator in (c for c in node.children if c.type == "variable_declarator"):
            value = declarator.child_by_field_name("value")
            module = _required(value, source, "require")
            if module:
                found.append(Import(module, alias=node_text(declarator.child_by_field_name("name"), source)))
        return found
    return []


def _required(call: Node | None, source: bytes, function: str) -> str:
    """The module of `require("m")` (or `require "m"` in Lua), else ""."""
    if call is None or call.type not in ("call_expression", "function_call"):
        return ""
    callee = call.child_by_field_name("function") or call.child_by_field_name("name")
    if node_text(callee, source) != function:
        return ""
    arguments = call.child_by_field_name("arguments")
    strings = [c for c in (arguments.children if arguments else []) if c.type == "string"]
    return _string(strings[0], source) if strings else ""


def _string(node: Node | None, source: bytes) -> str:
    return node_text(node, source).strip("'\"`[]=") if node is not None else ""


def _lua_requires(root: Node, source: bytes) -> list[Import]:
    """`local name = require("a.b")` anywhere at the top level of the chunk."""
    found = []
    for node in root.children:
        declaration = (
            node.named_children[0] if node.type == "variable_declaration" and node.named_children else node
        )
        if declaration.type != "assignment_statement":
            continue
        names = [c for c in declaration.named_children if c.type == "variable_list"]
        values = [c for c in declaration.named_children if c.type == "expression_list"]
        if not names or not values:
            continue
        for target, value in zip(names[0].named_children, values[0].named_children, strict=False):
            module = _required(value, source, "require")
            if module:
                found.append(Import(module, alias=node_text(target, source)))
    return found


# --- from a module to the file that holds it


def module_paths(imported: Import, importer: str, language: str) -> tuple[list[str], list[str]]:
    """(exact paths relative to the importer's folder root, path tails to look up anywhere)."""
    module = imported.module
    if language == "python":
        level = len(module) - len(module.lstrip("."))
        dotted = module[level:].replace(".", "/")
        if level:
            base = posixpath.dirname(importer)
            for _ in range(level - 1):
                base = posixpath.dirname(base)
            stem = posixpath.join(base, dotted) if dotted else base
            exact = [f"{stem}.py", f"{stem}/__init__.py", *(f"{stem}/{n}.py" for n in imported.names)]
            return [posixpath.normpath(p) for p in exact], []
        return [], [f"{dotted}.py", f"{dotted}/__init__.py", f"{dotted}.pyi"]
    if language in SCRIPT_LANGUAGES:
        if not module.startswith("."):
            return [], []  # a package from node_modules: not indexed
        stem = posixpath.normpath(posixpath.join(posixpath.dirname(importer), module))
        stem = next((stem[: -len(s)] for s in JAVASCRIPT_SUFFIXES if stem.endswith(s)), stem)
        exact = [stem + ext for ext in _SCRIPT_SUFFIXES] + [f"{stem}/index{ext}" for ext in _SCRIPT_SUFFIXES]
        return exact, []
    if language == "lua":
        dotted = module.replace(".", "/")
        return [], [f"{dotted}.lua", f"{dotted}/init.lua"]
    return [], []


def resolve(index: RepositoryIndex, imported: Import, importer: IndexedFile | None, root: Path | None,
            path: str, language: str) -> list[IndexedFile]:  # fmt: skip
    """The indexed files an import names (a Python package's `from . import a, b` may name several)."""
    exact, tails = module_paths(imported, path, language)
    found: list[IndexedFile] = []
    if root is not None:
        for relative in exact:
            file = index.get(root / relative) if not relative.startswith("..") else None
            if file is not None and file not in found and file is not importer:
                found.append(file)
    for tail in tails:
        candidates = [f for f in index.by_tail(tail) if f is not importer]
        if candidates:  # the one that shares most of the importer's folder
            found.append(max(candidates, key=lambda f: (_shared(f.path, path), -len(f.path))))
            break
    return found


def _shared(a: str, b: str) -> int:
    return len(posixpath.commonpath([a, b]).split("/")) if posixpath.commonpath([a, b]) else 0
