"""Repository-level held-out evaluation: each source unpacked whole as a workspace, the cross-file subset
(positions whose middle uses a name another file of the package defines), and the copy heuristic
searching a row's other files. Offline: packages are fixtures built here, grammars and records are real."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from evaluation.benchmarks import load_items
from evaluation.cli import build_parser
from evaluation.heldout.build import HeldoutFile
from evaluation.heldout.crossfile import (
    MAX_LINE_POSITIONS,
    MAX_POSITIONS,
    Taken,
    build_crossfile,
    crossfile_cuts,
    defined_elsewhere,
    package_definitions,
)
from evaluation.heldout.cuts import ALL_KINDS, FileSyntax, candidate_cuts, line_cuts
from evaluation.heldout.definitions import BUILTIN_MEMBERS, BUILTINS, file_names, used_names
from evaluation.heldout.manifest import CROSSFILE_HEADING, crossfile_section, with_section
from evaluation.heldout.records import CROSSFILE_OUTPUTS, DATA_DIR, OUTPUTS, HeldoutRecord, read_records
from evaluation.heldout.sources import ALL_SOURCES, CROSSFILE_SOURCES, SOURCES, HeldoutSource
from evaluation.heldout.syntax import parses_cleanly
from evaluation.heldout.workspaces import (
    MANIFEST,
    build_workspaces,
    code_files,
    folder_name,
    other_files,
    row_workspace,
    workspace_for,
)
from training.corpus.sources.debian import DEBIAN_SPECS

WHEEL = HeldoutSource("pypi", "fixturepkg", "1.0.0", "python")
NPM = HeldoutSource("npm", "@scope/fixture-ts", "2.0.0", "typescript")
DEB = HeldoutSource("debian", "lua-fixture", "0.1-1", "lua", strip=r"^usr/share/lua/5\.1/")

# Two Python modules: `util` defines what `core` uses; each long enough for the held-out filters.
UTIL_PY = (
    "".join(
        f'def convert_value_{i}(raw, scale):\n    """Scale a raw reading."""\n'
        f"    return raw * scale + {i}\n\n\n"
        for i in range(9)
    )
    + "class Registry:\n    def register_entry(self, key, value):\n        self.entries[key] = value\n"
)
CORE_PY = (
    "from .util import Registry, convert_value_1, convert_value_2\n\n\n"
    + "".join(
        f"def handle_{i}(reading, factor):\n"
        f"    total = convert_value_{1 + i % 2}(reading, factor)\n"
        f"    if total > {i}:\n"
        f"        total = total - {i}\n"
        f"        reading = reading + total\n"
        f"    return total + reading\n\n\n"
        for i in range(8)
    )
    + "def setup(registry):\n    registry.register_entry('a', 1)\n    return registry\n"
)


# ---- fixture packages ----------------------------------------------------------------------------


def _wheel(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{WHEEL.name}-{WHEEL.version}-py3-none-any.whl", "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)


def _npm(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / f"scope-fixture-ts-{NPM.version}.tgz", "w:gz") as tf:
        for name, text in files.items():
            raw = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tf.addfile(info, io.BytesIO(raw))


def _deb(folder: Path, tmp: Path, files: dict[str, str], links: dict[str, str]) -> None:
    root = tmp / "debroot"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {DEB.name}\nVersion: {DEB.version}\nArchitecture: all\nMaintainer: t <t@example.org>\n"
        "Description: fixture\n"
    )
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for name, target in links.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).symlink_to(target)
    folder.mkdir(parents=True, exist_ok=True)
    deb = folder / f"{DEB.name}_{DEB.version}_all.deb"
    subprocess.run(
        ["dpkg-deb", "--build", "--root-owner-group", str(root), str(deb)], check=True, capture_output=True
    )


WHEEL_FILES = {
    "fixturepkg/__init__.py": "",
    "fixturepkg/util.py": UTIL_PY,
    "fixturepkg/core.py": CORE_PY,
    "fixturepkg/data/table.csv": "a,b\n1,2\n",
    "fixturepkg-1.0.0.dist-info/METADATA": "Metadata-Version: 2.4\nName: fixturepkg\nVersion: 1.0.0\n"
    "License-Expression: MIT\n",
    "fixturepkg-1.0.0.dist-info/RECORD": "",
}
NPM_FILES = {
    "package/package.json": json.dumps({"name": NPM.name, "version": NPM.version, "license": "MIT"}),
    "package/src/index.ts": "export const answer: number = 42;\n",
    "package/index.js": "exports.answer = 42;\n",
    "package/index.d.ts": "export declare const answer: number;\n",
    "package/dist/bundle.js": "var answer=42;\n",
    "package/README.md": "# fixture\n",
}
DEB_FILES = {
    "usr/share/lua/5.1/fixture/init.lua": "local M = {}\nfunction M.run() return 1 end\nreturn M\n",
    "usr/share/doc/lua-fixture/copyright": "Files: *\nLicense: MIT\n",
}


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    _wheel(folder / "pypi", WHEEL_FILES)
    _npm(folder / "npm", NPM_FILES)
    return folder


# ---- workspaces -----------------------------------------------------------------------------------


def test_a_wheel_and_an_npm_tarball_unpack_whole_and_the_manifest_maps_them(cache, tmp_path):
    out = tmp_path / "workspaces"
    manifest = build_workspaces(cache, out, offline=True, sources=(WHEEL, NPM))
    assert manifest == {WHEEL.id: folder_name(WHEEL), NPM.id: folder_name(NPM)}
    assert json.loads((out / MANIFEST).read_text()) == manifest
    wheel_dir, npm_dir = workspace_for(WHEEL.id, out), workspace_for(NPM.id, out)
    for name, text in WHEEL_FILES.items():  # every file, not only the code the held-out set keeps
        assert (wheel_dir / name).read_text() == text
    for name, text in NPM_FILES.items():  # the tarball's package/ folder is the workspace's root
        assert (npm_dir / name.removeprefix("package/")).read_text() == text
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, *manifest.values()])
    with pytest.raises(KeyError, match="no workspace"):
        workspace_for("pypi:other==1", out)


def test_workspaces_are_idempotent_deterministic_and_need_no_download_once_there(cache, tmp_path):
    first = build_workspaces(cache, tmp_path / "a", offline=True, sources=(WHEEL, NPM))
    second = build_workspaces(cache, tmp_path / "b", offline=True, sources=(WHEEL, NPM))
    assert first == second
    tree_a = {
        p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()
    }
    tree_b = {
        p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()
    }
    assert tree_a == tree_b
    shutil.rmtree(cache)  # a workspace that is there is not unpacked again: no artefact is needed
    assert build_workspaces(cache, tmp_path / "a", offline=True, sources=(WHEEL, NPM)) == first
    assert build_workspaces(cache, tmp_path / "c", offline=True, sources=(WHEEL, NPM)) == {}


def test_an_archive_member_outside_its_package_is_not_written(tmp_path):
    cache = tmp_path / "cache"
    _npm(cache / "npm", {**NPM_FILES, "package/../../escaped.ts": "x"})
    build_workspaces(cache, tmp_path / "ws", offline=True, sources=(NPM,))
    assert not list(tmp_path.rglob("escaped.ts"))
    assert (workspace_for(NPM.id, tmp_path / "ws") / "src/index.ts").is_file()


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb to build a .deb")
def test_a_debian_package_unpacks_its_installed_tree_under_its_prefix_without_symlinks(tmp_path):
    cache = tmp_path / "cache"
    _deb(cache / "debian", tmp_path, DEB_FILES, {"usr/share/lua/5.2/fixture": "../5.1/fixture"})
    build_workspaces(cache, tmp_path / "ws", offline=True, sources=(DEB,))
    folder = workspace_for(DEB.id, tmp_path / "ws")
    found = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir())
    assert found == ["usr/share/lua/5.1/fixture/init.lua"]  # installed paths, so record paths resolve


def test_code_files_leave_out_compiled_output_of_a_typescript_package(cache, tmp_path):
    build_workspaces(cache, tmp_path / "ws", offline=True, sources=(WHEEL, NPM))
    assert list(code_files(workspace_for(NPM.id, tmp_path / "ws"))) == ["src/index.ts"]
    assert set(code_files(workspace_for(WHEEL.id, tmp_path / "ws"))) == {
        "fixturepkg/__init__.py",
        "fixturepkg/core.py",
        "fixturepkg/util.py",
    }


# ---- names: what a file defines, binds and uses -------------------------------------------------


def test_python_definitions_split_top_level_names_members_and_local_bindings():
    text = (
        "import os\nfrom .x import Imported\nCONST = 1\n"
        "def top(p, q=1, *args, k: int = 2, **kw):\n    local = p\n    for i, j in p: pass\n"
        "class K(Base):\n    attr = 1\n    def meth(self, v):\n        self.field = v\n"
    )
    names = file_names(text, "python")
    assert names.defined == {"CONST", "top", "K"}
    assert names.members == {"attr", "meth", "field"}
    assert {"p", "q", "args", "k", "kw", "local", "i", "j", "self", "v"} <= names.bound
    assert not {"os", "Imported"} & names.bound  # an import binds nothing: the name is another file's


def test_typescript_definitions_split_top_level_names_members_and_local_bindings():
    text = (
        'import { A } from "./a";\nexport const X = 1, { y, z: zz } = obj;\n'
        "export function f(a: number, { b }: T, c = 2): void { const loc = 1; }\n"
        "export class C<T> { field = 1; constructor() { this.inst = 2; } method(m) { return (q) => q; } }\n"
        "interface I { prop: string }\ntype Alias = string;\nenum E { One, Two = 2 }\n"
    )
    names = file_names(text, "typescript")
    assert names.defined == {"X", "y", "zz", "f", "C", "I", "Alias", "E"}
    assert names.members == {"field", "constructor", "inst", "method", "prop", "One", "Two"}
    assert {"a", "b", "c", "loc", "m", "q", "T"} <= names.bound and "A" not in names.bound


def test_lua_definitions_split_top_level_names_members_and_local_bindings():
    text = (
        "local M = {}\nlocal function helper(a) return a end\nfunction M.foo(x) local y = 1 return y end\n"
        "function M:bar(w) self.sock = w end\nM.baz = 3\nlocal t = { key = 1 }\n"
        "for i, v in ipairs(t) do end\n"
    )
    names = file_names(text, "lua")
    assert names.defined == {"M", "helper", "t"}
    assert names.members == {"foo", "bar", "sock", "baz", "key"}
    assert {"a", "x", "y", "w", "i", "v"} <= names.bound and not {"i", "v"} & names.defined


USES = [
    ("python", "x = sys.platform + os.path.sep + obj.size(key=1) + load(y)\n", "x sys os obj load y", "size"),
    ("typescript", "const x = Math.max(obj.size, load(y));\n", "x Math obj load y", "size"),
    ("lua", "local x = string.format(obj.size, obj:get(), load(y))\n", "x string obj load y", "size get"),
]


@pytest.mark.parametrize(("language", "text", "bare", "members"), USES)
def test_used_names_tell_bare_names_from_members_and_skip_the_runtimes_members(language, text, bare, members):
    syntax = FileSyntax(text, language)
    assert used_names(syntax, 0, len(syntax.source)) == (set(bare.split()), set(members.split()))


# ---- the cross-file subset ------------------------------------------------------------------------


def _package(tmp_path: Path) -> Path:
    folder = tmp_path / "pkg"
    for name, text in (("fixturepkg/util.py", UTIL_PY), ("fixturepkg/core.py", CORE_PY)):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def test_a_cut_is_cross_file_only_when_its_middle_uses_a_name_another_file_defines(tmp_path):
    package = package_definitions(_package(tmp_path), "python")
    file = HeldoutFile(WHEEL, "fixturepkg/core.py", "MIT", CORE_PY)
    syntax = FileSyntax(CORE_PY, "python")
    cuts = crossfile_cuts(file, syntax, defined_elsewhere(package, file.path), Taken(set(), set()))
    middles = {syntax.text(c.start, c.end) for found in cuts.values() for c in found}
    assert "convert_value_1(reading, factor)" in middles  # util.py defines it, core.py only imports it
    assert "registry.register_entry('a', 1)" in middles  # a method util.py's class defines
    assert not any(m.startswith("total - ") or m == "reading + total" for m in middles)  # core.py's own
    offered = candidate_cuts(syntax) | {"line": line_cuts(syntax)}
    assert 0 < sum(map(len, cuts.values())) < sum(map(len, offered.values()))
    # util.py's own definitions are not cross-file for util.py.
    util = HeldoutFile(WHEEL, "fixturepkg/util.py", "MIT", UTIL_PY)
    util_cuts = crossfile_cuts(
        util, FileSyntax(UTIL_PY, "python"), defined_elsewhere(package, util.path), Taken(set(), set())
    )
    assert not any(util_cuts.values())


def test_a_position_the_heldout_files_hold_is_not_cut_again(tmp_path):
    package = package_definitions(_package(tmp_path), "python")
    file = HeldoutFile(WHEEL, "fixturepkg/core.py", "MIT", CORE_PY)
    syntax = FileSyntax(CORE_PY, "python")
    elsewhere = defined_elsewhere(package, file.path)
    free = crossfile_cuts(file, syntax, elsewhere, Taken(set(), set()))
    cut = free["rest_of_line"][0]
    middle = syntax.text(cut.start, cut.end)
    by_middle = crossfile_cuts(file, syntax, elsewhere, Taken(set(), {(WHEEL.id, file.path, middle)}))
    by_cursor = crossfile_cuts(file, syntax, elsewhere, Taken({(WHEEL.id, file.path, cut.start)}, set()))
    for taken in (by_middle, by_cursor):
        assert cut not in taken["rest_of_line"] and len(taken["rest_of_line"]) < len(free["rest_of_line"])


def test_the_subset_builds_end_to_end_offline_and_the_same_twice(cache, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"path": "other/x.py", "text": "print('unrelated')\n"}) + "\n")
    outs = []
    for run in ("one", "two"):
        out = tmp_path / run
        out.mkdir()
        result = build_crossfile(cache, [corpus], tmp_path / f"ws-{run}", out, offline=True, sources=(WHEEL,))
        outs.append(out)
    records = list(read_records("python-crossfile", outs[0]))
    assert records and result.counts["python-crossfile"] == Counter(r.kind for r in records)
    assert (outs[0] / "python-crossfile.jsonl").read_bytes() == (
        outs[1] / "python-crossfile.jsonl"
    ).read_bytes()
    assert {r.path for r in records} == {"fixturepkg/core.py"}  # util.py uses nothing from core.py
    assert Counter(r.kind for r in records)["line"] <= 1 and len(records) <= 4
    assert all(r.text == CORE_PY and r.split == "report" and r.source == WHEEL.id for r in records)


# ---- the committed cross-file files ---------------------------------------------------------------


@pytest.fixture(scope="module")
def crossfile_records() -> dict[str, list[HeldoutRecord]]:
    return {name: list(read_records(name)) for name in CROSSFILE_OUTPUTS}


@pytest.mark.parametrize("name", list(CROSSFILE_OUTPUTS))
def test_each_crossfile_file_loads_with_every_kind_and_enough_positions(name, crossfile_records):
    items = load_items("heldout", language=name, root="/nonexistent")
    assert 100 <= len(items) <= MAX_POSITIONS + MAX_LINE_POSITIONS
    assert {i.language for i in items} == {CROSSFILE_OUTPUTS[name][0]}
    assert set(Counter(i.kind for i in items)) == set(ALL_KINDS)
    assert [i.id for i in items] == [r.id for r in crossfile_records[name]]
    assert build_parser().parse_args(["heldout", "--language", name]).language == name


def test_crossfile_rows_are_report_rows_of_listed_sources_and_no_heldout_row_again(crossfile_records):
    sources = {s.id: s for s in ALL_SOURCES}
    held = [r for name in OUTPUTS for r in read_records(name)]
    cursors = {(r.source, r.path, len(r.prefix)) for r in held}
    middles = {(r.source, r.path, r.middle) for r in held}
    ids = {r.id for r in held}
    for records in crossfile_records.values():
        for r in records:
            assert r.split == "report" and sources[r.source].split == "report"
            assert sources[r.source].language == r.language
            assert (r.source, r.path, len(r.prefix)) not in cursors
            assert (r.source, r.path, r.middle) not in middles
            assert r.id not in ids
            ids.add(r.id)


def test_every_crossfile_middle_uses_a_name_its_own_file_does_not_bind(crossfile_records):
    for records in crossfile_records.values():
        for r in records:
            assert parses_cleanly(r.text, r.language, r.path), r.id
            syntax = FileSyntax(r.text, r.language, r.path)
            start = len(r.prefix.encode())
            bare, members = used_names(syntax, start, start + len(r.middle.encode()))
            own = file_names(r.text, r.language, r.path).bound
            foreign = (bare - BUILTINS[r.language]) | (members - BUILTIN_MEMBERS[r.language])
            assert foreign - own, r.id


def test_crossfile_only_sources_are_new_lua_packages_held_out_from_training():
    training = {spec.package for spec in DEBIAN_SPECS}
    assert CROSSFILE_SOURCES and not {s.id for s in CROSSFILE_SOURCES} & {s.id for s in SOURCES}
    for source in CROSSFILE_SOURCES:
        assert source.split == "report" and source.name not in training
    sources_md = (DATA_DIR / "SOURCES.md").read_text()
    section = crossfile_section(sources_md)
    assert all(s.id in section for s in CROSSFILE_SOURCES)
    assert all(f"{name}.jsonl" in section for name in CROSSFILE_OUTPUTS)


def test_the_crossfile_section_survives_a_rewrite_of_the_rest():
    section = f"{CROSSFILE_HEADING}\n\nrows\n"
    text = with_section("# Title\n\n## Counts\n\nold\n", section)
    assert crossfile_section(text) == section
    rebuilt = with_section("# Title\n\n## Counts\n\nnew\n", crossfile_section(text))
    assert rebuilt.endswith(section) and "new" in rebuilt and "old" not in rebuilt
    replaced = with_section(rebuilt + "\n## Later\n", f"{CROSSFILE_HEADING}\n\nother\n")
    assert "rows" not in replaced and "other" in replaced and replaced.endswith("## Later\n")


# ---- the copy heuristic with the repository -------------------------------------------------------


def test_a_rows_own_file_is_never_read_from_its_workspace(tmp_path):
    record = next(read_records("python"))
    folder = tmp_path / "ws" / "pkg"
    poisoned = folder / record.path
    poisoned.parent.mkdir(parents=True)
    poisoned.write_text(record.prefix + "POISON" + record.suffix)  # what a disk read would leak
    (folder / "other.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "ws" / MANIFEST).write_text(json.dumps({record.source: "pkg"}))
    assert row_workspace(record.id, tmp_path / "ws") == (folder, record.path)
    item = next(i for i in load_items("heldout", language="python") if i.id == record.id)
    assert other_files(tmp_path / "ws")(item) == ["def helper():\n    return 1\n"]
