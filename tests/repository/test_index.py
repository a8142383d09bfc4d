"""The workspace index: BM25 windows by identifier, replacing and removing files, caps, path tails."""

from __future__ import annotations

from pathlib import Path

from dgemma_lsp.repository.index import WINDOW_STRIDE, RepositoryIndex, terms

ROOT = Path("/project")
GEOMETRY = "def rectangle_area(width, height):\n    return width * height\n"
NETWORK = "def open_socket(host, port):\n    return connect_tcp(host, port)\n"


def index_of(files: dict[str, str], **caps: int) -> RepositoryIndex:
    index = RepositoryIndex(**caps)
    for relative, text in files.items():
        assert index.add(ROOT, ROOT / relative, "python", text)
    return index


def test_terms_are_identifiers_without_keywords_or_single_letters() -> None:
    assert terms("def area(w, height):\n    return self.width * height") == {
        "area": 1,
        "height": 2,
        "width": 1,
    }


def test_the_window_sharing_rare_identifiers_ranks_first() -> None:
    index = index_of({"geometry.py": GEOMETRY, "network.py": NETWORK, "other.py": "value = 1\n" * 50})
    hits = index.query({"rectangle_area", "height"}, 5)
    assert hits[0].file.path == "geometry.py" and hits[0].start_line == 0
    assert all(hit.file.path != "network.py" for hit in hits)  # nothing in common: not a hit at all
    assert index.query({"open_socket"}, 5, exclude=ROOT / "network.py") == []
    both = index.query({"rectangle_area", "open_socket"}, 5, boost={ROOT / "network.py": 3.0})
    assert [hit.file.path for hit in both] == ["network.py", "geometry.py"]


def test_a_file_added_again_replaces_its_windows_and_a_removed_one_is_gone() -> None:
    index = index_of({"geometry.py": GEOMETRY, "network.py": NETWORK})
    index.add(ROOT, ROOT / "geometry.py", "python", "def circle_area(radius):\n    return radius ** 2\n")
    assert index.query({"rectangle_area"}, 5) == []
    assert index.text_of(index.query({"circle_area"}, 5)[0].file).startswith("def circle_area")
    assert index.stats().files == 2
    assert index.remove(ROOT / "geometry.py") and not index.remove(ROOT / "geometry.py")
    assert index.query({"circle_area"}, 5) == [] and index.get(ROOT / "geometry.py") is None
    assert index.stats().files == 1 and index.stats().bytes == len(NETWORK)


def test_caps_leave_files_out() -> None:
    index = index_of({"a.py": GEOMETRY}, max_files=1)
    assert not index.add(ROOT, ROOT / "b.py", "python", NETWORK)
    assert index.add(ROOT, ROOT / "a.py", "python", NETWORK)  # replacing is not growing
    by_bytes = RepositoryIndex(max_bytes=len(GEOMETRY) + 10)
    assert by_bytes.add(ROOT, ROOT / "a.py", "python", GEOMETRY)
    assert not by_bytes.add(ROOT, ROOT / "b.py", "python", NETWORK)
    assert by_bytes.full() is False and by_bytes.stats().files == 1


def test_many_changes_compact_the_table_and_retrieval_stays_the_same() -> None:
    long = "".join(f"def helper_{i}(value):\n    return value + {i}\n" for i in range(60))
    index = index_of({"helpers.py": long, "geometry.py": GEOMETRY})
    before = [(h.file.path, h.start_line, round(h.score, 4)) for h in index.query({"helper_37", "height"}, 5)]
    for _ in range(300):  # each edit kills the file's windows and adds new ones
        index.add(ROOT, ROOT / "helpers.py", "python", long)
    table = index._table
    assert table.dead < max(1000, table.live) and len(table.file) < 300 * 13
    after = [(h.file.path, h.start_line, round(h.score, 4)) for h in index.query({"helper_37", "height"}, 5)]
    assert after == before
    helper_line = 37 * 2  # its def: in the windows that start at the strides before it
    assert [hit[1] for hit in after if hit[0] == "helpers.py"] == [
        start for start in range(0, helper_line + 1, WINDOW_STRIDE) if helper_line - start < 20
    ]


def test_files_are_found_by_the_tail_of_their_path() -> None:
    index = index_of({"src/pkg/util.py": GEOMETRY, "tests/util.py": NETWORK})
    assert {f.path for f in index.by_tail("util.py")} == {"src/pkg/util.py", "tests/util.py"}
    assert [f.path for f in index.by_tail("pkg/util.py")] == ["src/pkg/util.py"]
    assert index.by_tail("kg/util.py") == []  # whole components only
