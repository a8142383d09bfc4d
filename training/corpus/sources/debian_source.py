"""Debian source packages (apt-get source with a private deb-src list): their upstream tarballs."""

from __future__ import annotations

import logging
import re
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

from training.corpus.languages import language_of
from training.corpus.sources.base import Candidate, Source, SourceInfo, run_fetch
from training.corpus.sources.debian import DebianSpec, included, package_copyright

log = logging.getLogger(__name__)


# Source packages come through apt-get with a private deb-src list, so the machine's own apt
# configuration is never touched.
_DEB_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
_DEB_SRC_LINE = f"deb-src [signed-by={_DEB_KEYRING}] http://deb.debian.org/debian {{suite}} main\n"


def _apt_source_options(cache: Path) -> list[str] | None:
    """apt-get options for the private deb-src list, refreshed once per cache."""
    base = (cache / "apt-src").resolve()  # apt-get runs in the package's folder
    (base / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (base / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    suite = "bookworm"
    os_release = Path("/etc/os-release")
    if os_release.exists() and (m := re.search(r"^VERSION_CODENAME=(\w+)", os_release.read_text(), re.M)):
        suite = m.group(1)
    (base / "sources.list").write_text(_DEB_SRC_LINE.format(suite=suite))
    opts = [
        f"-oDir::Etc::SourceList={base / 'sources.list'}",
        "-oDir::Etc::SourceParts=/nonexistent",
        f"-oDir::State::Lists={base / 'lists'}",
        f"-oDir::Cache={base / 'cache'}",
    ]
    fresh = any((base / "lists").glob("*Sources*"))
    if not fresh and not run_fetch(["apt-get", *opts, "update"], "deb-src index"):
        return None
    return opts


def _dsc_missing(folder: Path) -> list[str] | None:
    """Files the package's .dsc lists that are not in the folder; None when there is no .dsc."""
    dsc = next(folder.glob("*.dsc"), None) if folder.is_dir() else None
    if dsc is None:
        return None
    names = re.findall(r"^ [0-9a-f]{32,} \d+ (\S+)$", dsc.read_text(errors="replace"), re.M)
    return sorted({n for n in names if not (folder / n).exists()})


def fetch_deb_source(package: str, cache: Path, offline: bool) -> Path | None:
    """Folder holding the package's .dsc, orig tarball and debian tarball, all of them."""
    folder = cache / "src" / package
    if _dsc_missing(folder) == [] or offline:
        return folder if _dsc_missing(folder) == [] else None
    if shutil.which("apt-get") is None:
        log.warning("skip debian-src:%s: apt-get is not available", package)
        return None
    opts = _apt_source_options(cache)
    if opts is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    cmd = ["apt-get", *opts, "source", "--download-only", package]
    if not run_fetch(cmd, f"debian-src:{package}", folder):
        return None
    missing = _dsc_missing(folder)
    if missing:
        log.warning("skip debian-src:%s: the registry lacks %s", package, ", ".join(missing))
    return folder if missing == [] else None


def _source_tarballs(folder: Path) -> tuple[Path | None, Path | None]:
    """(upstream tarball, debian tarball); a native package has only the first."""
    tars = sorted(p for p in folder.iterdir() if ".tar." in p.name)
    debian = next((p for p in tars if ".debian.tar." in p.name), None)
    orig = next((p for p in tars if ".orig.tar." in p.name), None)
    if orig is None:  # native package
        orig = next((p for p in tars if p is not debian and ".orig-" not in p.name), None)
    return orig, debian


def _tar_member_text(tar_path: Path, suffix: str) -> str | None:
    with tarfile.open(tar_path) as tf:
        for member in tf.getmembers():
            if member.isfile() and (member.name == suffix or member.name.endswith("/" + suffix)):
                return tf.extractfile(member).read().decode("utf-8", "replace")  # type: ignore[union-attr]
    return None


def debian_source_files(spec: DebianSpec, cache: Path, offline: bool, langs: set[str]) -> Source:
    """Files of a Debian source package's upstream tarball, licensed per file by debian/copyright."""
    info = SourceInfo(spec.package, "debian-src")
    if not langs & set(spec.langs):
        info.skipped = "language not requested"
        return info, iter(())
    folder = fetch_deb_source(spec.package, cache, offline)
    orig, debian = _source_tarballs(folder) if folder is not None else (None, None)
    if folder is None or orig is None:
        info.skipped = "not fetched"
        return info, iter(())
    dsc = next(folder.glob("*.dsc"))
    info.version = dsc.stem.split("_", 1)[1]
    copyright_ = package_copyright(info, _tar_member_text(debian or orig, "debian/copyright"))
    if copyright_ is None:
        return info, iter(())

    def walk() -> Iterator[Candidate]:
        with tarfile.open(orig) as tf:
            for member in tf:
                if not member.isfile() or "/" not in member.name:
                    continue
                rel = member.name.split("/", 1)[1]  # drop the "<pkg>-<version>/" top folder
                if rel.startswith("debian/") or not included(rel, spec):
                    continue
                fh = tf.extractfile(member)
                raw = fh.read() if fh is not None else b""
                lang = language_of(rel, spec.cpp_headers, raw[:128])
                if lang is None or lang not in spec.langs:
                    continue
                verdict = copyright_.license_for(rel)
                drop = None if verdict.accepted else "license"
                yield Candidate(
                    f"{spec.package}-{info.version}/{rel}", lang, raw, verdict.license or "", drop
                )

    return info, walk()
