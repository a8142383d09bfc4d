"""What a completion reads from the repository: imported definitions, similar windows, lookup texts,
and a prompt that stays still while the user types."""

from __future__ import annotations

from pathlib import Path

from tree_sitter import Parser

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.definitions import definitions
from dgemma_lsp.repository.imports import Import, imports_of, resolve
from dgemma_lsp.repository.index import RepositoryIndex
from dgemma_lsp.repository.retrieval import NOTHING, Definitions, DocumentRetrieval, query_terms

REGISTRY = LanguageRegistry()
ROOT = Path("/project")
SHAPES = '''"""Shapes."""
from dataclasses import dataclass


@dataclass
class Rectangle:
    """An axis-aligned rectangle."""

    width: float
    height: float

    def scaled(self, factor: float) -> "Rectangle":
        return Rectangle(self.width * factor, self.height * factor)


def rectangle_area(shape: Rectangle) -> float:
    """The area of `shape`,
    in square units."""
    return shape.width * shape.height


UNIT = "m"
'''
REPORT = """from shapes import Rectangle, rectangle_area


def report_areas(rows):
    total = 0.0
    for row in rows:
        shape = Rectangle(row.width, row.height)
        total += rectangle_area(shape)
    return total
"""
MAIN = """from shapes.geometry import rectangle_area
from shapes.geometry import Rectangle


def summarize(rows):
    shapes = [Rectangle(row.width, row.height) for row in rows]
    total = 0.0
    for shape in shapes:
        total += """


def parsed(text: str, language: str = "python"):
    source = text.encode()
    return source, Parser(REGISTRY.grammar(language)).parse(source)


def test_imports_of_each_language() -> None:
    source, tree = parsed("import os\nimport a.b as c\nfrom .x import y, z as w\nfrom m import *\n")
    assert imports_of(tree.root_node, source, "python") == [
        Import("os", alias="os"), Import("a.b", alias="c"), Import(".x", ("y", "z"))
    ]  # fmt: skip
    text = "import { A, B as C } from './x';\nimport D from '../y';\nimport * as E from './z';\n"
    source, tree = parsed(text + "const g = require('./g');\n", "typescript")
    assert imports_of(tree.root_node, source, "typescript") == [
        Import("./x", ("A", "B")), Import("../y", ("default",)), Import("./z", alias="E"),
        Import("./g", alias="g"),
    ]  # fmt: skip
    source, tree = parsed('local m = require("a.b")\nlocal n = require "c"\n', "lua")
    assert imports_of(tree.root_node, source, "lua") == [Import("a.b", alias="m"), Import("c", alias="n")]


def test_definitions_are_signatures_docstrings_and_members_not_bodies() -> None:
    found = definitions(SHAPES, "python", REGISTRY.grammar("python"))
    assert found["Rectangle"] == (
        '@dataclass\nclass Rectangle:\n    """An axis-aligned rectangle."""\n    width: float\n'
        '    height: float\n    def scaled(self, factor: float) -> "Rectangle":'
    )
    assert (
        found["rectangle_area"]
        == 'def rectangle_area(shape: Rectangle) -> float:\n    """The area of `shape`,"""'
    )
    assert found["UNIT"] == 'UNIT = "m"'
    ts = definitions(
        "export function area(w: number, h: number): number { return w * h }\n"
        "export interface Size { width: number }\nexport default class Box { open(): void {} }\n",
        "typescript",
        REGISTRY.grammar("typescript"),
    )
    assert ts["area"] == "function area(w: number, h: number): number"
    assert ts["Size"] == "interface Size { width: number }"
    assert ts["default"] == ts["Box"] == "class Box {\n  open(): void\n}"
    lua = definitions(
        "local M = {}\nfunction M.area(w, h)\n  return w * h\nend\nreturn M\n", "lua", REGISTRY.grammar("lua")
    )
    assert lua == {"area": "function M.area(w, h)"}


def index_of(files: dict[str, str]) -> RepositoryIndex:
    index = RepositoryIndex()
    for relative, text in files.items():
        index.add(ROOT, ROOT / relative, "python", text)
    return index


def test_modules_resolve_relative_to_the_importer_or_by_the_tail_of_their_path() -> None:
    index = index_of(
        {"src/shapes/geometry.py": SHAPES, "src/shapes/__init__.py": "", "src/app/main.py": MAIN}
    )
    geometry = index.get(ROOT / "src/shapes/geometry.py")
    importer = index.get(ROOT / "src/app/main.py")
    assert resolve(
        index, Import("shapes.geometry", ("Rectangle",)), importer, ROOT, "src/app/main.py", "python"
    ) == [geometry]
    assert resolve(
        index, Import("..shapes.geometry", ("x",)), importer, ROOT, "src/app/main.py", "python"
    ) == [geometry]
    assert resolve(index, Import("numpy", alias="np"), importer, ROOT, "src/app/main.py", "python") == []


def retrieval_for(index: RepositoryIndex, relative: str) -> DocumentRetrieval:
    return DocumentRetrieval(index, Definitions(REGISTRY), ROOT / relative, ROOT)


def related(retrieval: DocumentRetrieval, text: str, cursor: int | None = None, budget: int = 400):
    source, tree = parsed(text)
    return retrieval.related(
        text, source, len(text) if cursor is None else cursor, "python", tree, budget, len
    )


def test_imported_definitions_come_first_then_windows_like_the_code_above_the_cursor() -> None:
    index = index_of(
        {"shapes/geometry.py": SHAPES, "report.py": REPORT, "app/main.py": MAIN, "other.py": "x = 1\n"}
    )
    found = related(retrieval_for(index, "app/main.py"), MAIN, budget=2000)
    assert [s.path for s in found.snippets] == ["shapes/geometry.py", "report.py", "shapes/geometry.py"]
    definition = found.snippets[0].text
    assert (
        definition.startswith("def rectangle_area(shape: Rectangle) -> float:") and "@dataclass" in definition
    )
    assert "return shape.width" not in definition  # signatures, not bodies
    assert "total += rectangle_area(shape)" in found.snippets[1].text  # the window most like the code above
    assert found.lookup_texts == (REPORT, SHAPES)  # the chosen windows' files, then the imported ones
    small = related(retrieval_for(index, "app/main.py"), MAIN, budget=150)
    assert sum(len(f"{s.path}\n{s.text}") + 1 for s in small.snippets) <= 150  # `len` counts the tokens here


def test_typing_keeps_the_snippets_until_the_query_really_changes() -> None:
    index = index_of(
        {"shapes/geometry.py": SHAPES, "report.py": REPORT, "other.py": "def unrelated_thing():\n    pass\n"}
    )
    retrieval = retrieval_for(index, "app/main.py")
    first = related(retrieval, MAIN)
    for typed in ("r", "re", "rect", "rectangle_ar"):  # the word being typed is not in the query
        assert related(retrieval, MAIN + typed) is first
    assert query_terms(MAIN + "rectangle_ar", len(MAIN) + 12) == query_terms(MAIN, len(MAIN))
    # A new line with a new name: the query changes, but the windows chosen are still among the best.
    assert related(retrieval, MAIN + "rectangle_area(shape)\n    print(total)\n").snippets == first.snippets


def test_the_document_itself_and_open_documents_are_not_lookup_texts() -> None:
    index = index_of({"report.py": REPORT, "app/main.py": MAIN})
    opened = DocumentRetrieval(
        index, Definitions(REGISTRY), ROOT / "app/main.py", ROOT, lambda: frozenset({ROOT / "report.py"})
    )
    found = related(opened, MAIN)
    assert [s.path for s in found.snippets] == ["report.py"]  # still read into the prompt
    assert found.lookup_texts == ()  # searched as an open document already; main.py is the document


def test_open_and_recently_edited_files_are_favoured() -> None:
    twin = REPORT.replace("report_areas", "other_areas")
    index = index_of({"a_report.py": REPORT, "b_report.py": twin})

    def first(recent: frozenset[Path]) -> str:
        retrieval = DocumentRetrieval(
            index, Definitions(REGISTRY), ROOT / "main.py", ROOT, frozenset, lambda: recent
        )
        return (
            related(retrieval, "def summarize(rows):\n    total = rectangle_area(shape)\n").snippets[0].path
        )

    assert first(frozenset()) == "a_report.py"  # equal scores: the earlier window
    assert first(frozenset({ROOT / "b_report.py"})) == "b_report.py"


def test_open_documents_weigh_more_than_a_better_window_elsewhere() -> None:
    # The open file's window is longer for the same names (BM25 weighs it less): the open boost puts it first.
    query = "def summarize(rows):\n    total = rectangle_area(shape)\n"
    other = "def other(rows):\n    total = rectangle_area(shape)\n"
    opened = "def opened(rows):\n    total = rectangle_area(shape)\n    padding_one + padding_two\n"
    index = index_of({"a_other.py": other, "b_opened.py": opened})

    def first(open_paths: frozenset[Path]) -> str:
        retrieval = DocumentRetrieval(
            index, Definitions(REGISTRY), ROOT / "main.py", ROOT, lambda: open_paths
        )
        return related(retrieval, query).snippets[0].path

    assert first(frozenset()) == "a_other.py"
    assert first(frozenset({ROOT / "b_opened.py"})) == "b_opened.py"


def test_a_parse_not_taken_is_asked_for_again() -> None:
    taken: list = []
    accepting = [False]  # the indexer closed, then a new one
    definitions = Definitions(REGISTRY, later=lambda work: accepting[0] and (taken.append(work) or True))
    index = index_of({"shapes.py": SHAPES})
    file = index.get(ROOT / "shapes.py")
    assert definitions.known(file, index) is None and not taken
    accepting[0] = True
    assert definitions.known(file, index) is None and len(taken) == 1
    taken.pop()()
    assert "Rectangle" in definitions.known(file, index)


def test_handed_to_another_thread_the_answer_comes_an_ask_later_and_asks_wait_as_one() -> None:
    index = index_of({"shapes/geometry.py": SHAPES, "report.py": REPORT, "app/main.py": MAIN})
    jobs: list = []
    retrieval = DocumentRetrieval(
        index, Definitions(REGISTRY), ROOT / "app/main.py", ROOT, later=lambda work: jobs.append(work) or True
    )
    assert related(retrieval, MAIN) is NOTHING and len(jobs) == 1  # nothing computed here
    assert related(retrieval, MAIN + "r") is NOTHING and len(jobs) == 1  # the newest ask replaces it
    jobs.pop()()
    answer = related(retrieval, MAIN + "re")
    assert answer.snippets == related(retrieval_for(index, "app/main.py"), MAIN + "r").snippets
