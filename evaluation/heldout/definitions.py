"""Which names a file defines for other files, and which it binds itself, read by tree-sitter.

`defined`: the top-level names another file can use bare: functions, classes, constants and
assignments, TypeScript types, Lua top-level locals and functions. `members`: the names another file
uses after a dot: methods, class attributes and fields, `self.x = ...` / `this.x = ...`, interface and
enum members, Lua module members (`function M.x`, `M.x = ...`, `function M:x`, top-level table fields).
`bound`: every name the file introduces anywhere (those, locals, parameters, loop variables); imports
are left out, since a name a file imports is still another file's definition.
"""

from __future__ import annotations

import builtins
import io
import sys
import types
from dataclasses import dataclass, field
from typing import Literal

from tree_sitter import Node

from evaluation.heldout.cuts import FileSyntax
from evaluation.heldout.syntax import parse

# Names every program has without defining them: a use of one says nothing about other files.
_PY_TYPES = [v for v in vars(builtins).values() if isinstance(v, type)]
_PY_TYPES += [io.TextIOWrapper, io.BufferedReader, types.GeneratorType, types.CoroutineType, types.ModuleType]
_JS_GLOBALS = """
    Array ArrayBuffer BigInt Boolean DataView Date Error EvalError Function Infinity Intl JSON Map Math
    NaN Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Set String Symbol
    SyntaxError TypeError URIError Uint8Array WeakMap WeakRef WeakSet console document globalThis
    isFinite isNaN parseFloat parseInt performance process require self setInterval setTimeout
    clearInterval clearTimeout undefined window navigator location fetch structuredClone queueMicrotask
    Partial Required Readonly Record Pick Omit Exclude Extract ReturnType Parameters NonNullable
    InstanceType Awaited PromiseLike Iterable Iterator
"""
_JS_MEMBERS = """
    length prototype constructor toString valueOf at concat entries every fill filter find findIndex
    findLast findLastIndex flat flatMap forEach includes indexOf join keys lastIndexOf map pop push
    reduce reduceRight reverse shift slice some sort splice unshift values charAt charCodeAt codePointAt
    endsWith localeCompare match matchAll normalize padEnd padStart repeat replace replaceAll search
    split startsWith substring toLowerCase toUpperCase trim trimEnd trimStart assign create
    defineProperty freeze fromEntries getOwnPropertyNames getPrototypeOf hasOwnProperty is isArray from
    of then catch finally all allSettled race resolve reject any get set has delete clear size add apply
    bind call parse stringify abs ceil floor max min round random pow sqrt sign trunc log warn error
    info debug toFixed isInteger now getTime toISOString test exec next done value message name stack
"""
_LUA_GLOBALS = """
    assert collectgarbage coroutine debug dofile error getfenv getmetatable io ipairs load loadfile
    loadstring math module next os package pairs pcall print rawequal rawget rawlen rawset require
    select setfenv setmetatable string table tonumber tostring type unpack utf8 xpcall self _G _ENV
    _VERSION ngx vim
"""
_LUA_MEMBERS = """
    byte char dump find format gmatch gsub len lower match rep reverse sub upper pack unpack packsize
    concat insert remove sort move close flush lines read seek setvbuf write create resume running
    status wrap yield abs ceil floor max min huge pi random randomseed sqrt fmod log exp tointeger
    maxinteger mininteger clock date difftime execute exit getenv rename time tmpname loaded path cpath
    preload searchers traceback getinfo __index __newindex __call __tostring __len __eq __lt __le __add
    __sub __mul __div __mod __pow __unm __concat __gc __mode __metatable __close __name __pairs
"""
BUILTINS: dict[str, frozenset[str]] = {
    "python": frozenset(dir(builtins)) | {"self", "cls"},
    "typescript": frozenset(_JS_GLOBALS.split()),
    "lua": frozenset(_LUA_GLOBALS.split()) | {"ffi", "bit", "jit"},  # LuaJIT's own modules too
}
# Members every value of a builtin type has: `x.close()` says nothing about other files either.
BUILTIN_MEMBERS: dict[str, frozenset[str]] = {
    "python": frozenset(name for t in _PY_TYPES for name in dir(t)),
    "typescript": frozenset(_JS_MEMBERS.split()),
    "lua": frozenset(_LUA_MEMBERS.split()),
}
# Objects whose members are the runtime's, not the package's: builtin globals, standard modules.
_RUNTIME_OBJECTS: dict[str, frozenset[str]] = {
    "python": frozenset(sys.stdlib_module_names) | BUILTINS["python"] - {"self", "cls"},
    "typescript": BUILTINS["typescript"] - {"self"},
    "lua": BUILTINS["lua"] - {"self", "vim", "ngx"},  # a package may define `vim.x` (Neovim's runtime does)
}
# Leaf types that name something, per language.
NAME_TOKENS: dict[str, frozenset[str]] = {
    "python": frozenset({"identifier"}),
    "typescript": frozenset(
        {"identifier", "property_identifier", "type_identifier", "shorthand_property_identifier"}
    ),
    "lua": frozenset({"identifier"}),
}
_PATTERNS = frozenset(
    {
        "pattern_list", "tuple_pattern", "list_pattern", "list_splat_pattern", "dictionary_splat_pattern",
        "parenthesized_expression", "expression_list", "variable_list", "array_pattern", "object_pattern",
        "rest_pattern", "assignment_pattern", "pair_pattern", "shorthand_property_identifier_pattern",
        "typed_parameter", "default_parameter", "typed_default_parameter", "required_parameter",
        "optional_parameter", "object_assignment_pattern", "keyword_separator", "positional_separator",
    }
)  # fmt: skip


Where = Literal["top", "member", "local"]


@dataclass
class FileNames:
    """What one file defines for others, by how they are used (bare, or after a dot), and every name it
    binds."""

    defined: set[str] = field(default_factory=set)  # top level: used bare
    members: set[str] = field(default_factory=set)  # methods, attributes, fields: used after a dot
    bound: set[str] = field(default_factory=set)

    def add(self, names: list[str], where: Where) -> None:
        """Record names the file binds, and defines for others when top-level or members."""
        self.bound.update(names)
        if where == "top":
            self.defined.update(names)
        elif where == "member":
            self.members.update(names)


def _text(node: Node | None) -> str:
    """A node's source text ("" for none)."""
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def pattern_names(node: Node | None) -> list[str]:
    """The plain names a binding target introduces (`a`, `a, b`, `[a, *b]`, `{a, b: c}`)."""
    if node is None:
        return []
    if node.type in ("identifier", "shorthand_property_identifier_pattern"):
        return [_text(node)]
    if node.type not in _PATTERNS:
        return []
    if node.type in ("pair_pattern", "assignment_pattern", "object_assignment_pattern"):
        target = node.child_by_field_name("value") or node.child_by_field_name("left")
        return pattern_names(target)
    if node.type in ("required_parameter", "optional_parameter"):
        return pattern_names(node.child_by_field_name("pattern"))
    if node.type in ("default_parameter", "typed_default_parameter"):
        return pattern_names(node.child_by_field_name("name"))
    return [name for child in node.named_children for name in pattern_names(child)]


def _member_name(node: Node | None, owners: frozenset[str]) -> list[str]:
    """`x` of `self.x`, `this.x`, `M.x`, `M:x` when the object is one of `owners` (any when empty)."""
    if node is None or node.type not in _CHAINS:
        return []
    obj = node.child_by_field_name("object") or node.child_by_field_name("table")
    name = node.child_by_field_name("attribute") or node.child_by_field_name("property")
    name = name or node.child_by_field_name("field") or node.child_by_field_name("method")
    if obj is None or name is None or (owners and _text(obj) not in owners):
        return []
    return [_text(name)]


def _python(node: Node, scope: str, names: FileNames) -> None:
    """Python: module-level names, class-level names and `self.x` as members; all bindings."""
    kind, inner = node.type, scope
    where: Where = "top" if scope == "module" else "member" if scope == "class" else "local"
    if kind in ("function_definition", "class_definition"):
        names.add([_text(node.child_by_field_name("name"))], where)
        inner = "function" if kind == "function_definition" else "class"
    elif kind in ("assignment", "augmented_assignment"):
        left = node.child_by_field_name("left")
        names.add(pattern_names(left), where)
        names.add(_member_name(left, frozenset({"self", "cls"})), "member")
    elif kind in ("for_statement", "for_in_clause"):
        names.add(pattern_names(node.child_by_field_name("left")), "local")
    elif kind in (
        "as_pattern_target",
        "global_statement",
        "nonlocal_statement",
        "lambda_parameters",
        "parameters",
    ):
        names.add([n for c in node.named_children for n in pattern_names(c)], "local")
    elif kind == "named_expression":
        names.add(pattern_names(node.child_by_field_name("name")), "local")
    elif kind in ("import_statement", "import_from_statement", "future_import_statement"):
        return
    for child in node.children:
        _python(child, inner, names)


_TS_TYPES = frozenset(
    {
        "class_declaration", "abstract_class_declaration", "interface_declaration", "type_alias_declaration",
        "enum_declaration", "internal_module", "module", "class",
    }
)  # fmt: skip
_TS_MEMBERS = frozenset(
    {
        "method_definition", "method_signature", "abstract_method_signature", "public_field_definition",
        "property_signature", "field_definition",
    }
)  # fmt: skip
_TS_FUNCTIONS = frozenset(
    {"function_declaration", "generator_function_declaration", "function_expression", "arrow_function"}
)


def _typescript(node: Node, scope: str, names: FileNames) -> None:
    """TypeScript: module-level declarations; class, interface and enum members and `this.x`; all bindings."""
    kind, inner = node.type, scope
    where: Where = "top" if scope == "module" else "local"
    if kind in _TS_FUNCTIONS:
        names.add(pattern_names(node.child_by_field_name("name")), where)
        param = node.child_by_field_name("parameter")  # an arrow function's lone parameter
        names.add(pattern_names(param), "local")
        inner = "function"
    elif kind in _TS_TYPES:
        names.add(
            pattern_names(node.child_by_field_name("name")) or _names_of(node, "type_identifier"), where
        )
        inner = "class"
    elif kind in _TS_MEMBERS:
        names.add([_text(node.child_by_field_name("name"))], "member")
        inner = "function"
    elif kind == "enum_body":
        names.add(_names_of(node, "property_identifier"), "member")
        names.add(
            [
                _text(c.child_by_field_name("name"))
                for c in node.named_children
                if c.type == "enum_assignment"
            ],
            "member",
        )
    elif kind == "variable_declarator":
        names.add(pattern_names(node.child_by_field_name("name")), where)
    elif kind == "formal_parameters":
        names.add([n for c in node.named_children for n in pattern_names(c)], "local")
    elif kind == "assignment_expression":
        names.add(_member_name(node.child_by_field_name("left"), frozenset({"this"})), "member")
    elif kind in ("catch_clause", "for_in_statement"):
        names.add(
            pattern_names(node.child_by_field_name("parameter") or node.child_by_field_name("left")), "local"
        )
    elif kind == "type_parameter":
        names.add([_text(node.child_by_field_name("name"))], "local")
    elif kind == "import_statement":
        return
    for child in node.children:
        _typescript(child, inner, names)


def _names_of(node: Node, kind: str) -> list[str]:
    """The texts of a node's direct children of one type."""
    return [_text(c) for c in node.named_children if c.type == kind]


def _lua(node: Node, scope: str, names: FileNames) -> None:
    """Lua: top-level locals and functions; `M.x`/`M:x` functions and fields, top-level table fields as
    members; all bindings."""
    kind, inner = node.type, scope
    where: Where = "top" if scope == "module" else "local"
    if kind == "function_declaration":
        name = node.child_by_field_name("name")
        member = name is not None and name.type != "identifier"
        names.add(
            _member_name(name, frozenset()) if member else pattern_names(name), "member" if member else where
        )
        inner = "function"
    elif kind == "function_definition":
        inner = "function"
    elif kind == "parameters":
        names.add(_names_of(node, "identifier"), "local")
    elif kind == "variable_list":
        loop = node.parent is not None and node.parent.type == "for_generic_clause"
        names.add(_names_of(node, "identifier"), "local" if loop else where)
        names.add([n for c in node.named_children for n in _member_name(c, frozenset())], "member")
    elif kind == "for_numeric_clause":
        names.add(pattern_names(node.child_by_field_name("name")), "local")
    elif kind == "field" and scope == "module":
        name = node.child_by_field_name("name")
        names.add(pattern_names(name) if name is not None and name.type == "identifier" else [], "member")
    elif kind == "variable_declaration":
        names.add(_names_of(node, "identifier"), where)
    for child in node.children:
        _lua(child, inner, names)


_CHAINS = frozenset({"attribute", "member_expression", "dot_index_expression", "method_index_expression"})
_WALKERS = {"python": _python, "typescript": _typescript, "lua": _lua}


def file_names(text: str, language: str, path: str = "") -> FileNames:
    """The names a file defines for others and binds itself."""
    names = FileNames()
    _WALKERS[language](parse(text, language, path).root_node, "module", names)
    for found in (names.defined, names.members, names.bound):
        found.discard("")
    return names


def _member_of(node: Node) -> Node | None:
    """The object a name is a member of (`a` for `b` in `a.b`, `a:b`), or None for a bare name."""
    parent = node.parent
    if parent is None:
        return None
    for name_field, object_field in (
        ("attribute", "object"),
        ("property", "object"),
        ("field", "table"),
        ("method", "table"),
    ):
        if parent.child_by_field_name(name_field) == node:
            return parent.child_by_field_name(object_field)
    return None


def _root(node: Node) -> Node:
    """The leftmost object of a member chain (`os` of `os.path`)."""
    while node.type in _CHAINS and node.named_children:
        node = node.named_children[0]
    return node


def used_names(syntax: FileSyntax, start: int, end: int) -> tuple[set[str], set[str]]:
    """The names a span of a parsed file uses (byte offsets), read in the whole file: (bare, members).

    Members of the runtime's objects (`sys.platform`, `Math.max`, `string.format`) are left out, and so
    are keyword arguments' names; a TypeScript key or a Lua table field counts as a member."""
    language = syntax.language
    bare: set[str] = set()
    members: set[str] = set()
    stack = [syntax.tree.root_node]
    while stack:
        node = stack.pop()
        if node.end_byte <= start or node.start_byte >= end:
            continue
        stack.extend(node.children)
        if node.child_count or node.start_byte < start or node.end_byte > end:
            continue
        if node.type not in NAME_TOKENS[language] or node.parent is None:
            continue
        name, parent = _text(node), node.parent
        owner = _member_of(node)
        if owner is not None:
            if _text(_root(owner)) not in _RUNTIME_OBJECTS[language]:
                members.add(name)
        elif node.type == "property_identifier" or (
            parent.type == "field" and parent.child_by_field_name("name") == node
        ):
            members.add(name)
        elif parent.type != "keyword_argument" or parent.child_by_field_name("name") != node:
            bare.add(name)
    return bare, members
