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
from pathlib import Path

import pytest

from evaluation.benchmarks import load_items
from evaluation.heldout.records import read_records
from evaluation.heldout.sources import HeldoutSource
from evaluation.heldout.workspaces import (
    MANIFEST,
    build_workspaces,
    code_files,
    folder_name,
    other_files,
    row_workspace,
    workspace_for,
)

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


# ---- the heuristic reads a row's other files, never its own ----------------------------------------


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
