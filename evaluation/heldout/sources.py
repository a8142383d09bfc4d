"""The held-out sources, pinned: packages that no training list names, fetched into a cache.

Every source is a registry package at one version. Fetching goes through the registry's own client
(pip, npm, apt-get) into `--cache`; reading and license judgement reuse training.corpus (wheel
METADATA, package.json, Debian DEP-5 per file), so the held-out set follows the corpus's rules.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from training.corpus.sources.base import Candidate, SourceInfo
from training.corpus.sources.debian import DebianSpec, cached_deb, debian_files
from training.corpus.sources.npm import cached_npm, npm_files
from training.corpus.sources.pypi import cached_wheel, wheel_files

log = logging.getLogger(__name__)

Registry = Literal["pypi", "npm", "debian"]
Split = Literal["report", "calibration"]


@dataclass(frozen=True)
class HeldoutSource:
    """One pinned package, its language and the split its positions go to."""

    registry: Registry
    name: str
    version: str
    language: str  # python, typescript or lua
    split: Split = "report"
    strip: str = ""  # Debian: installed prefix of the upstream tree, for DEP-5 globs

    @property
    def id(self) -> str:
        return f"{self.registry}:{self.name}=={self.version}"


# Python: pure-Python wheels, two disjoint groups of packages. `report` is what figures are published
# on; `calibration` tunes confidence gates and is never reported on.
PYTHON_SOURCES: tuple[HeldoutSource, ...] = (
    HeldoutSource("pypi", "trio", "0.35.0", "python"),
    HeldoutSource("pypi", "h2", "4.4.1", "python"),
    HeldoutSource("pypi", "wsproto", "1.3.2", "python"),
    HeldoutSource("pypi", "jmespath", "1.1.0", "python"),
    HeldoutSource("pypi", "tinydb", "4.9.0", "python"),
    HeldoutSource("pypi", "apscheduler", "3.11.3", "python"),
    HeldoutSource("pypi", "mistletoe", "1.6.0", "python", "calibration"),
    HeldoutSource("pypi", "transitions", "0.9.3", "python", "calibration"),
    HeldoutSource("pypi", "typeguard", "4.6.1", "python", "calibration"),
    HeldoutSource("pypi", "tablib", "3.10.0", "python", "calibration"),
    HeldoutSource("pypi", "pyee", "13.0.1", "python", "calibration"),
)

# TypeScript: npm packages whose tarball ships the .ts sources next to the compiled output.
TYPESCRIPT_SOURCES: tuple[HeldoutSource, ...] = (
    HeldoutSource("npm", "@tanstack/table-core", "8.21.3", "typescript"),
    HeldoutSource("npm", "@tanstack/store", "0.11.3", "typescript"),
    HeldoutSource("npm", "true-myth", "9.4.0", "typescript"),
    HeldoutSource("npm", "web-vitals", "6.2.3", "typescript"),
    HeldoutSource("npm", "workbox-core", "7.4.1", "typescript"),
)

# Lua: Debian binary packages; each file's license comes from the package's DEP-5 copyright.
LUA_SOURCES: tuple[HeldoutSource, ...] = (
    HeldoutSource("debian", "neovim-runtime", "0.7.2-7", "lua", strip=r"^usr/share/nvim/"),
    HeldoutSource("debian", "lua-orbit", "2.2.1+dfsg-2", "lua"),
    HeldoutSource("debian", "lua-cgi", "5.2~alpha2-2", "lua"),
    HeldoutSource("debian", "lua-nginx-kafka", "0.07-1", "lua"),
    HeldoutSource("debian", "lua-nginx-string", "0.11-1", "lua"),
    HeldoutSource("debian", "lua-nginx-websocket", "0.08-1", "lua"),
    HeldoutSource("debian", "lua-nginx-redis-connector", "0.06-1", "lua"),
)

SOURCES: tuple[HeldoutSource, ...] = PYTHON_SOURCES + TYPESCRIPT_SOURCES + LUA_SOURCES

# Cut into the cross-file subset only (with the report sources above), never into the files above: Lua
# packages of several files that use each other, since the report sources give too few such positions.
CROSSFILE_SOURCES: tuple[HeldoutSource, ...] = (
    HeldoutSource("debian", "lua-doc", "3.0.1+gitdb9e868-2", "lua"),
    HeldoutSource("debian", "libluajit-5.1-common", "2.1.0~beta3+git20220320+dfsg-4.1+deb12u1", "lua"),
    HeldoutSource("debian", "lua-expat", "1.5.1-3", "lua"),
)

ALL_SOURCES: tuple[HeldoutSource, ...] = SOURCES + CROSSFILE_SOURCES


def _run(cmd: list[str], cwd: Path) -> bool:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("%s: %s", " ".join(cmd), exc)
        return False
    if done.returncode != 0:
        log.warning("%s: %s", " ".join(cmd), (done.stderr or done.stdout).strip()[-300:])
    return done.returncode == 0


def _cached(source: HeldoutSource, folder: Path) -> Path | None:
    """The cached artefact of exactly this version, if any."""
    if source.registry == "pypi":
        hit = cached_wheel(source.name, folder)
        return hit if hit is not None and hit.name.split("-")[1] == source.version else None
    if source.registry == "npm":
        hit = cached_npm(source.name, folder)
        return hit if hit is not None and hit.name.endswith(f"-{source.version}.tgz") else None
    hit = cached_deb(source.name, folder)
    # Debian writes an epoch's colon as %3a in file names.
    return hit if hit is not None and hit.stem.split("_")[1].split("%3a")[-1] == source.version else None


def fetch(source: HeldoutSource, cache: Path, offline: bool = False) -> Path | None:
    """Download the pinned version into cache/<registry>/ unless it is there already."""
    folder = cache / source.registry
    folder.mkdir(parents=True, exist_ok=True)
    if (hit := _cached(source, folder)) is not None or offline:
        return hit
    if source.registry == "pypi":
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet"]
        # pip runs in `folder`, so a relative `-d` would nest the cache inside itself.
        cmd += ["-d", str(folder.resolve()), f"{source.name}=={source.version}"]
    elif source.registry == "npm":
        cmd = ["npm", "pack", "--silent", f"{source.name}@{source.version}"]
    else:
        cmd = ["apt-get", "download", f"{source.name}={source.version}"]
    if shutil.which(cmd[0]) is None and cmd[0] != sys.executable:
        log.warning("skip %s: %s is not installed", source.id, cmd[0])
        return None
    _run(cmd, folder)
    return _cached(source, folder)


def read_source(source: HeldoutSource, cache: Path) -> tuple[SourceInfo, Iterator[Candidate]]:
    """The package's files and license verdict, by training.corpus's readers (cache only)."""
    langs = {source.language}
    folder = cache / source.registry
    if source.registry == "pypi":
        return wheel_files(source.name, folder, True, langs)
    if source.registry == "npm":
        return npm_files(source.name, folder, True, langs)
    spec = DebianSpec(source.name, (source.language,), strip=source.strip)
    return debian_files(spec, folder, True, langs)
