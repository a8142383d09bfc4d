"""Each held-out source unpacked whole, as a checkout of the package holds it: the workspace around
its rows' files, for repository-level evaluation.

    python -m evaluation.heldout workspaces [--cache data/heldout-cache] [--out data/heldout-workspaces]

One folder per source, `<folder>/<record.path>` being a record's file: every file of a wheel, the
`package/` tree of an npm tarball, a Debian package's installed tree (under its `strip` prefix when
it has one). MANIFEST.json maps each source id to its folder, relative to the root. A folder is
written once, under a temporary name and then renamed, so a second run only checks that it is there.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import shutil
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath

from evaluation.benchmarks import Item
from evaluation.heldout.records import ALL_OUTPUTS, read_records
from evaluation.heldout.sources import ALL_SOURCES, HeldoutSource, fetch
from training.corpus.filters import decode_source
from training.corpus.languages import language_of
from training.corpus.sources.debian import unpack_deb
from training.corpus.sources.npm import _BUILD_DIRS

log = logging.getLogger(__name__)

DEFAULT_WORKSPACES = Path("data/heldout-workspaces")
MANIFEST = "MANIFEST.json"


def folder_name(source: HeldoutSource) -> str:
    """A file-system-safe folder name for a source, unique per registry, name and version."""
    return re.sub(r"[^A-Za-z0-9._+~-]+", "-", f"{source.registry}-{source.name}-{source.version}").strip("-")


def _safe(rel: str) -> bool:
    """A relative path that stays inside its folder."""
    path = PurePosixPath(rel)
    return bool(rel) and not path.is_absolute() and ".." not in path.parts


def wheel_members(wheel: Path) -> Iterator[tuple[str, bytes]]:
    """Every file of a wheel, as pip would install it (paths inside the archive)."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if not info.is_dir():
                yield info.filename, zf.read(info)


def npm_members(tgz: Path) -> Iterator[tuple[str, bytes]]:
    """Every regular file of an npm tarball, its top folder (`package/`) taken off."""
    with tarfile.open(tgz) as tf:
        for member in tf.getmembers():
            if member.isfile() and "/" in member.name:
                yield member.name.split("/", 1)[1], tf.extractfile(member).read()  # type: ignore[union-attr]


def debian_members(deb: Path, strip: str) -> Iterator[tuple[str, bytes]]:
    """Every regular file a Debian package installs (under `strip` when given), at its installed path."""
    root = unpack_deb(deb, deb.parent)
    if root is None:
        return
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(root).as_posix()
        if rel != ".done" and (not strip or re.match(strip, rel)):
            yield rel, path.read_bytes()


def package_members(source: HeldoutSource, artefact: Path) -> Iterator[tuple[str, bytes]]:
    """The files of a fetched artefact, by its registry's layout."""
    if source.registry == "pypi":
        return wheel_members(artefact)
    if source.registry == "npm":
        return npm_members(artefact)
    return debian_members(artefact, source.strip)


def unpack(source: HeldoutSource, cache: Path, out: Path, offline: bool = False) -> Path | None:
    """The source's workspace folder under `out`, unpacked from the cache unless it is there already."""
    folder = out / folder_name(source)
    if folder.is_dir():
        return folder
    artefact = fetch(source, cache, offline)
    if artefact is None:
        log.warning("no workspace for %s: not fetched", source.id)
        return None
    staging = out / f".{folder.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    for rel, raw in package_members(source, artefact):
        if not _safe(rel):
            log.warning("%s: skip %s (outside the package)", source.id, rel)
            continue
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(raw)
    staging.mkdir(parents=True, exist_ok=True)  # an empty package is still a workspace
    staging.rename(folder)
    return folder


def build_workspaces(
    cache: Path,
    out: Path = DEFAULT_WORKSPACES,
    offline: bool = False,
    sources: Iterable[HeldoutSource] = ALL_SOURCES,
) -> dict[str, str]:
    """Unpack every source's workspace and write MANIFEST.json (source id -> folder); the mapping."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, str] = {}
    for source in sources:
        folder = unpack(source, cache, out, offline)
        if folder is not None:
            manifest[source.id] = folder.relative_to(out).as_posix()
            log.info("%-44s %s", source.id, manifest[source.id])
    (out / MANIFEST).write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n", encoding="utf-8")
    return manifest


def _manifest(root: Path) -> dict[str, str]:
    """MANIFEST.json under `root`, read each time (a rebuild may have rewritten it)."""
    path = root / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"no {MANIFEST} in {root}: run python -m evaluation.heldout workspaces")
    return json.loads(path.read_text(encoding="utf-8"))


def workspace_for(source_id: str, root: Path = DEFAULT_WORKSPACES) -> Path:
    """The folder that holds source `source_id` unpacked whole (a record's file is `<it>/<record.path>`)."""
    manifest = _manifest(root)
    if source_id not in manifest:
        raise KeyError(f"no workspace for {source_id} in {root / MANIFEST}")
    return root / manifest[source_id]


def is_compiled(rel: str, has_ts: bool) -> bool:
    """Build output beside the sources (a bundle folder; the .js and .d.ts of a TypeScript package)."""
    lang = language_of(rel)
    if {p.lower() for p in PurePosixPath(rel).parts[:-1]} & _BUILD_DIRS:
        return True
    return has_ts and (lang == "javascript" or rel.lower().endswith(".d.ts"))


def code_files(folder: Path) -> dict[str, str]:
    """The package's code files (path -> text): a language training.corpus knows, UTF-8, not build output.

    The compiled output of a file is that file again, so a lookup in it would read the row's answer."""
    rels = sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
    )
    has_ts = any(r.endswith((".ts", ".tsx")) and not r.endswith(".d.ts") for r in rels)
    files: dict[str, str] = {}
    for rel in rels:
        if language_of(rel) is None or is_compiled(rel, has_ts):
            continue
        if (text := decode_source((folder / rel).read_bytes())) is not None:
            files[rel] = text
    return files


@functools.cache
def _locations() -> dict[str, tuple[str, str]]:
    """Every held-out row's id -> (source id, path inside the package)."""
    return {r.id: (r.source, r.path) for name in ALL_OUTPUTS for r in read_records(name)}


def row_workspace(item_id: str, root: Path = DEFAULT_WORKSPACES) -> tuple[Path, str]:
    """A held-out row's workspace folder and its file's path in it: the file whose text the row's
    prefix and suffix stand for, never to be read from disk."""
    if item_id not in _locations():
        raise KeyError(f"no held-out row {item_id!r}")
    source, path = _locations()[item_id]
    return workspace_for(source, root), path


def other_files(root: Path = DEFAULT_WORKSPACES) -> Callable[[Item], list[str]]:
    """For a held-out row, the texts of its package's other code files, read once per package."""
    packages = functools.cache(code_files)

    def others(item: Item) -> list[str]:
        """The row's package's code files but its own (whose text is the row's prefix and suffix)."""
        folder, path = row_workspace(item.id, root)
        return [text for rel, text in packages(folder).items() if rel != path]

    return others
