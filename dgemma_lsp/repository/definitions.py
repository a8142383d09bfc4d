"""What a file defines, by tree-sitter: each top-level name as the model should see it, a signature and
the first line of its docstring; a class with its fields and its methods' signatures; a short type."""

from __future__ import annotations

import re

from tree_sitter import Language, Node, Parser

from dgemma_lsp.repository.imports import SCRIPT_LANGUAGES, node_text

MAX_CLASS_LINES = 16  # of a class: its header, fields and method signatures
MAX_TYPE_LINES = 12  # of an interface, type alias or enum
MAX_LINE_CHARS = 160
_QUOTE = re.compile(r"^[rRbBuUfF]*(\"\"\"|\'\'\'|\"|\')")


def definitions(text: str, language: str, grammar: Language) -> dict[str, str]:
    """Each top-level name `text` defines -> how the model should see it (a signature, not a body)."""
    source = text.encode("utf-8")
    root = Parser(grammar).parse(source).root_node
    if language == "python":
        return _python_definitions(root, source)
    if language in SCRIPT_LANGUAGES:
        return _ts_definitions(root, source)
    if language == "lua":
        return _lua_definitions(root, source)
    return {}


def _head(node: Node, source: bytes, body: Node | None) -> str:
    """A definition's text up to its body: its signature as in the file, without the comments that
    stand between it and the body (told by the tree, in one pass)."""
    return source[node.start_byte : _signature_end(node, body)].decode("utf-8", "replace").rstrip()


def _signature_end(node: Node, body: Node | None) -> int:
    """Where the last token before `body` (or before the end of `node`) that is not a comment ends."""
    if not node.children:
        return node.end_byte
    end = node.start_byte
    for child in node.children:
        if body is not None and child.start_byte >= body.start_byte:
            break
        if child.type == "comment":
            continue
        if body is not None and child.end_byte > body.start_byte:  # holds the body: the end is inside
            return _signature_end(child, body)
        end = child.end_byte
    return end


def _docstring(body: Node | None, source: bytes, indent: str) -> list[str]:
    """The first line of a body's docstring, closed again if the docstring goes on."""
    first = body.named_children[0] if body is not None and body.named_children else None
    if first is None or first.type != "expression_statement" or first.named_children[0].type != "string":
        return []
    text = node_text(first, source).strip()
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
        name = node_text(definition.child_by_field_name("name"), source)
        if definition.type == "function_definition":
            body = definition.child_by_field_name("body")
            found[name] = "\n".join([_head(node, source, body), *_docstring(body, source, "    ")])
        elif definition.type == "class_definition":
            found[name] = _python_class(node, definition, source)
        elif definition.type == "expression_statement" and definition.named_children:
            assignment = definition.named_children[0]
            target = assignment.child_by_field_name("left")
            if assignment.type == "assignment" and target is not None and target.type == "identifier":
                found[node_text(target, source)] = node_text(definition, source).split("\n")[0][
                    :MAX_LINE_CHARS
                ]
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
            lines.append("    " + node_text(member, source).split("\n")[0][:MAX_LINE_CHARS])
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
    name = node_text(node.child_by_field_name("name"), source)
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
        return [(name, "\n".join(node_text(node, source).split("\n")[:MAX_TYPE_LINES]))]
    if kind in ("lexical_declaration", "variable_declaration"):
        shown = []
        for declarator in (c for c in node.children if c.type == "variable_declarator"):
            value = declarator.child_by_field_name("value")
            body = (
                value.child_by_field_name("body")
                if value is not None and value.type == "arrow_function"
                else None
            )
            head = _head(node, source, body) if body is not None else node_text(node, source).split("\n")[0]
            shown.append((node_text(declarator.child_by_field_name("name"), source), head[:MAX_LINE_CHARS]))
        return shown
    return []


def _lua_definitions(root: Node, source: bytes) -> dict[str, str]:
    """`function M.name(...)`, `local function name(...)`, `M.name = function(...)`: their first line."""
    found: dict[str, str] = {}
    for node in root.children:
        if node.type == "function_declaration":
            name = node_text(node.child_by_field_name("name"), source)
            found[name.split(".")[-1].split(":")[-1]] = _head(node, source, node.child_by_field_name("body"))
        elif node.type == "assignment_statement":
            line = node_text(node, source).split("\n")[0]
            target = node_text(node.named_children[0], source) if node.named_children else ""
            if "function" in line and target:
                found[target.split(".")[-1]] = line[:MAX_LINE_CHARS]
    return found
