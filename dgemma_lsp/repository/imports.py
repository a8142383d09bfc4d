"""What a file imports from the workspace, and what the imported files define, by tree-sitter.

- `imports_of`: the import statements of a document (Python `import` / `from ... import`, TypeScript
  and JavaScript `import ... from` and `require`, Lua `require`), as modules and the names taken;
- `resolve`: the indexed file a module names (relative to the importing file, or by its path's tail,
  the nearest to the importer first);
- `definitions`: each top-level name a file defines, as the model should see it: a signature and the
  first line of its docstring; a class with its fields and its methods' signatures; a short type.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Language, Node, Parser

from dgemma_lsp.repository.index import IndexedFile, RepositoryIndex

MAX_CLASS_LINES = 16  # of a class: its header, fields and method signatures
MAX_TYPE_LINES = 12  # of an interface, type alias or enum
MAX_LINE_CHARS = 160
_TS_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs")
_TS_LANGUAGES = {"typescript", "tsx", "javascript"}
_TRAILING_COMMENTS = re.compile(r"(\s*(#|//|--)[^\n]*)+\s*$")
_QUOTE = re.compile(r"^[rRbBuUfF]*(\"\"\"|\'\'\'|\"|\')")


@dataclass(frozen=True)
class Import:
    module: str  # as written: "a.b", ".x" (Python), "./x" (TypeScript), "a.b" (Lua)
    names: tuple[str, ...] = ()  # names taken from it; none: the module as a whole
    alias: str = ""  # the module's local name, for `alias.name` uses


def imports_of(root: Node, source: bytes, language: str) -> list[Import]:
    """The document's imports, in order."""
    if language == "python":
        return [i for node in root.children for i in _python_imports(node, source)]
    if language in _TS_LANGUAGES:
        return [i for node in root.children for i in _ts_imports(node, source)]
    if language == "lua":
        return _lua_requires(root, source)
    return []


def _text(node: Node | None, source: bytes) -> str:
    return "" if node is None else source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _python_imports(node: Node, source: bytes) -> list[Import]:
    if node.type == "import_statement":
        found = []
        for name in node.children_by_field_name("name"):
            if name.type == "aliased_import":
                module = _text(name.child_by_field_name("name"), source)
                found.append(Import(module, alias=_text(name.child_by_field_name("alias"), source)))
            else:
                module = _text(name, source)
                found.append(Import(module, alias=module))
        return found
    if node.type == "import_from_statement":
        module = _text(node.child_by_field_name("module_name"), source)
        names = []
        for name in node.children_by_field_name("name"):
            inner = name.child_by_field_name("name") if name.type == "aliased_import" else name
            names.append(_text(inner, source))
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
                    alias = _text(next((c for c in part.children if c.type == "identifier"), None), source)
                elif part.type == "named_imports":
                    for spec in (c for c in part.children if c.type == "import_specifier"):
                        names.append(_text(spec.child_by_field_name("name"), source))
        return [Import(module, tuple(names), alias)] if module else []
    if node.type in ("lexical_declaration", "variable_declaration"):
        found = []
        for declarator in (c for c in node.children if c.type == "variable_declarator"):
            value = declarator.child_by_field_name("value")
            module = _required(value, source, "require")
            if module:
                found.append(Import(module, alias=_text(declarator.child_by_field_name("name"), source)))
        return found
    return []


def _required(call: Node | None, source: bytes, function: str) -> str:
    """The module of `require("m")` (or `require "m"` in Lua), else ""."""
    if call is None or call.type not in ("call_expression", "function_call"):
        return ""
    callee = call.child_by_field_name("function") or call.child_by_field_name("name")
    if _text(callee, source) != function:
        return ""
    arguments = call.child_by_field_name("arguments")
    strings = [c for c in (arguments.children if arguments else []) if c.type == "string"]
    return _string(strings[0], source) if strings else ""


def _string(node: Node | None, source: bytes) -> str:
    return _text(node, source).strip("'\"`[]=") if node is not None else ""


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
                found.append(Import(module, alias=_text(target, source)))
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
    if language in _TS_LANGUAGES:
        if not module.startswith("."):
            return [], []  # a package from node_modules: not indexed
        stem = posixpath.normpath(posixpath.join(posixpath.dirname(importer), module))
        stem = re.sub(r"\.(js|jsx|mjs|cjs)$", "", stem)
        exact = [stem + ext for ext in _TS_EXTENSIONS] + [f"{stem}/index{ext}" for ext in _TS_EXTENSIONS]
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


# --- what a file defines


def definitions(text: str, language: str, grammar: Language) -> dict[str, str]:
    """Each top-level name `text` defines -> how the model should see it (a signature, not a body)."""
    source = text.encode("utf-8")
    root = Parser(grammar).parse(source).root_node
    if language == "python":
        return _python_definitions(root, source)
    if language in _TS_LANGUAGES:
        return _ts_definitions(root, source)
    if language == "lua":
        return _lua_definitions(root, source)
    return {}


def _head(node: Node, source: bytes, body: Node | None) -> str:
    """A definition's text up to its body: its signature as in the file, without the comments that
    stand between it and the body."""
    end = body.start_byte if body is not None else node.end_byte
    return _TRAILING_COMMENTS.sub("", source[node.start_byte : end].decode("utf-8", "replace")).rstrip()


def _docstring(body: Node | None, source: bytes, indent: str) -> list[str]:
    """The first line of a body's docstring, closed again if the docstring goes on."""
    first = body.named_children[0] if body is not None and body.named_children else None
    if first is None or first.type != "expression_statement" or first.named_children[0].type != "string":
        return []
    text = _text(first, source).strip()
    line = text.split("\n")[0]
    quote = _QUOTE.match(line)
    if "\n" in text and quote:
        line += quote.group(1)
    return [indent + line]


def _python_definitions(root: Node, source: bytes) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in root.children:
        definition = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
        if definition is None:
            continue
        name = _text(definition.child_by_field_name("name"), source)
        if definition.type == "function_definition":
            body = definition.child_by_field_name("body")
            found[name] = "\n".join([_head(node, source, body), *_docstring(body, source, "    ")])
        elif definition.type == "class_definition":
            found[name] = _python_class(node, definition, source)
        elif definition.type == "expression_statement" and definition.named_children:
            assignment = definition.named_children[0]
            target = assignment.child_by_field_name("left")
            if assignment.type == "assignment" and target is not None and target.type == "identifier":
                found[_text(target, source)] = _text(definition, source).split("\n")[0][:MAX_LINE_CHARS]
    return found


def _python_class(node: Node, definition: Node, source: bytes) -> str:
    """Its decorators and header, docstring, fields and methods' signatures (`node`: with decorators)."""
    body = definition.child_by_field_name("body")
    lines = [_head(node, source, body), *_docstring(body, source, "    ")]
    for member in body.named_children if body is not None else []:
        inner = member.child_by_field_name("definition") if member.type == "decorated_definition" else member
        if inner is not None and inner.type == "function_definition":
            lines.append("    " + _head(inner, source, inner.child_by_field_name("body")).replace("\n", " "))
        elif member.type == "expression_statement" and member.named_children[0].type == "assignment":
            lines.append("    " + _text(member, source).split("\n")[0][:MAX_LINE_CHARS])
        if len(lines) >= MAX_CLASS_LINES:
            break
    return "\n".join(lines)


def _ts_definitions(root: Node, source: bytes) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in root.children:
        exported = node.type == "export_statement"
        declaration = node.child_by_field_name("declaration") if exported else node
        if declaration is None:
            continue
        default = exported and any(c.type == "default" for c in node.children)
        for name, shown in _ts_declaration(declaration, source):
            found[name] = shown
            if default:
                found["default"] = shown
    return found


def _ts_declaration(node: Node, source: bytes) -> list[tuple[str, str]]:
    kind = node.type
    name = _text(node.child_by_field_name("name"), source)
    if kind in ("function_declaration", "generator_function_declaration", "function_signature"):
        return [(name, _head(node, source, node.child_by_field_name("body")))]
    if kind in ("class_declaration", "abstract_class_declaration"):
        body = node.child_by_field_name("body")
        lines = [_head(node, source, body) + " {"]
        for member in body.named_children if body is not None else []:
            member_body = member.child_by_field_name("body")
            lines.append("  " + _head(member, source, member_body).replace("\n", " ")[:MAX_LINE_CHARS])
            if len(lines) >= MAX_CLASS_LINES:
                break
        return [(name, "\n".join([*lines, "}"]))]
    if kind in ("interface_declaration", "type_alias_declaration", "enum_declaration"):
        return [(name, "\n".join(_text(node, source).split("\n")[:MAX_TYPE_LINES]))]
    if kind in ("lexical_declaration", "variable_declaration"):
        shown = []
        for declarator in (c for c in node.children if c.type == "variable_declarator"):
            value = declarator.child_by_field_name("value")
            body = (
                value.child_by_field_name("body")
                if value is not None and value.type == "arrow_function"
                else None
            )
            head = _head(node, source, body) if body is not None else _text(node, source).split("\n")[0]
            shown.append((_text(declarator.child_by_field_name("name"), source), head[:MAX_LINE_CHARS]))
        return shown
    return []


def _lua_definitions(root: Node, source: bytes) -> dict[str, str]:
    """`function M.name(...)`, `local function name(...)`, `M.name = function(...)`: their first line."""
    found: dict[str, str] = {}
    for node in root.children:
        if node.type == "function_declaration":
            name = _text(node.child_by_field_name("name"), source)
            found[name.split(".")[-1].split(":")[-1]] = _head(node, source, node.child_by_field_name("body"))
        elif node.type == "assignment_statement":
            line = _text(node, source).split("\n")[0]
            target = _text(node.named_children[0], source) if node.named_children else ""
            if "function" in line and target:
                found[target.split(".")[-1]] = line[:MAX_LINE_CHARS]
    return found
