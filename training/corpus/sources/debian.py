"""Debian binary packages that ship sources, licensed file by file by their debian/copyright."""

from __future__ import annotations

import fnmatch
import logging
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from training.corpus.debian_copyright import Dep5Copyright
from training.corpus.languages import language_of
from training.corpus.sources.base import Candidate, Source, SourceInfo, run_fetch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DebianSpec:
    """A Debian binary package that ships sources, and where they lie once unpacked."""

    package: str
    langs: tuple[str, ...]
    strip: str = ""  # regex: installed prefix of the upstream source tree (for copyright globs)
    include: tuple[str, ...] = ()  # path globs to take; empty: everything but docs
    exclude: tuple[str, ...] = ()  # path globs to skip (test suites, fixtures)
    cpp_headers: bool = False
    source: bool = False  # a source package (apt-get source) rather than a binary one


def included(rel: str, spec: DebianSpec) -> bool:
    if spec.include and not any(fnmatch.fnmatchcase(rel, pat) for pat in spec.include):
        return False
    return not any(fnmatch.fnmatchcase(rel, pat) for pat in spec.exclude)


def cached_deb(package: str, cache: Path) -> Path | None:
    found = sorted(cache.glob(f"{package}_*.deb"))
    return found[-1] if found else None


def fetch_deb(package: str, cache: Path, offline: bool) -> Path | None:
    cache.mkdir(parents=True, exist_ok=True)
    if (hit := cached_deb(package, cache)) is not None or offline:
        return hit
    if shutil.which("apt-get") is None:
        log.warning("skip debian:%s: apt-get is not available", package)
        return None
    if not run_fetch(["apt-get", "download", package], f"debian:{package} (try apt-get update)", cwd=cache):
        return None
    return cached_deb(package, cache)


def unpack_deb(deb: Path, cache: Path) -> Path | None:
    root = cache / "unpacked" / deb.stem
    if (root / ".done").exists():
        return root
    if shutil.which("dpkg") is None:
        log.warning("skip %s: dpkg is not available", deb.name)
        return None
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    if not run_fetch(["dpkg", "-x", str(deb), str(root)], deb.name):
        return None
    (root / ".done").touch()
    return root


def _debian_copyright(root: Path, package: str) -> str | None:
    own = root / "usr/share/doc" / package / "copyright"
    if own.is_file():
        return own.read_text(errors="replace")
    others = sorted(p for p in (root / "usr/share/doc").glob("*/copyright") if p.is_file())
    return others[0].read_text(errors="replace") if others else None


def package_copyright(info: SourceInfo, text: str | None) -> Dep5Copyright | None:
    """A package's debian/copyright, its main license recorded in `info`; None (skipped) if not DEP-5."""
    copyright_ = Dep5Copyright.parse(text) if text else None
    if copyright_ is None:
        info.skipped = "license: no machine-readable debian/copyright"
        return None
    main = copyright_.license_for("*")
    info.license = main.license or ""
    info.license_evidence = f"debian/copyright, per file; {main.reason} for Files: *"
    return copyright_


def debian_files(spec: DebianSpec, cache: Path, offline: bool, langs: set[str]) -> Source:
    info = SourceInfo(spec.package, "debian")
    if not langs & set(spec.langs):
        info.skipped = "language not requested"
        return info, iter(())
    deb = fetch_deb(spec.package, cache, offline)
    root = unpack_deb(deb, cache) if deb is not None else None
    if deb is None or root is None:
        info.skipped = "not fetched"
        return info, iter(())
    info.version = deb.stem.split("_")[1]
    copyright_ = package_copyright(info, _debian_copyright(root, spec.package))
    if copyright_ is None:
        return info, iter(())

    def walk() -> Iterator[Candidate]:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = path.relative_to(root).as_posix()
            if rel.startswith("usr/share/doc/") or not included(rel, spec):
                continue
            with path.open("rb") as fh:
                head = fh.read(128)
            lang = language_of(rel, spec.cpp_headers, head)
            if lang is None or lang not in spec.langs:
                continue
            source_path = re.sub(spec.strip, "", rel, count=1) if spec.strip else rel
            verdict = copyright_.license_for(source_path)
            drop = None if verdict.accepted else "license"
            raw = path.read_bytes() if verdict.accepted else b""
            yield Candidate(f"{spec.package}-{info.version}/{rel}", lang, raw, verdict.license or "", drop)

    return info, walk()


_LUA_BINARIES = (
    "lua-penlight", "lua-busted", "lua-luassert", "lua-say", "lua-cliargs", "lua-argparse", "lua-dkjson",
    "lua-json", "lua-inspect", "lua-ldoc", "lua-moses", "lua-mediator", "lua-term", "lua-system",
    "lua-socket", "lua-http", "lua-cqueues", "lua-lpeg-patterns", "lua-logging", "lua-markdown",
    "lua-messagepack", "lua-binaryheap", "lua-basexx", "lua-fifo", "lua-compat53", "lua-coxpcall",
    "lua-copas", "lua-check", "lua-unit", "lua-uri", "lua-lgi", "lua-nvim", "lua-resty-core",
    "lua-resty-lrucache", "lua-ansicolors", "lua-cosmo", "lua-wsapi", "lua-inifile", "lua-redis",
    "luarocks", "prosody", "prosody-modules", "rspamd", "lmod", "vis", "lua-ljsyscall", "lua-posix",
    "lua-yaml", "lua-readline", "lua-sec", "lua-leg", "lua-xmlrpc", "lua-soap", "lua-systemd",
    "lua-luaossl", "lua-lemock", "lua-dbi-common", "lua-curses", "lua-rings",
)  # fmt: skip
_BASH_BINARIES = (
    "bats", "bats-assert", "bats-support", "bats-file", "shunit2", "git-extras", "neofetch", "rbenv",
    "dehydrated",
)  # fmt: skip
_CPP_HEADER_BINARIES = (
    "nlohmann-json3-dev", "rapidjson-dev", "libspdlog-dev", "libcli11-dev", "doctest-dev",
    "libcereal-dev", "libcxxopts-dev", "libxsimd-dev", "libxtensor-dev", "libabsl-dev",
)  # fmt: skip
_C_SOURCES = (
    "sqlite3", "zlib", "lua5.4", "libuv1", "redis", "jq", "libyaml", "expat", "json-c", "jansson", "lz4",
    "hiredis", "libevent", "cjson", "musl", "tmux", "libsodium", "memcached", "lighttpd", "cmark", "md4c",
    "c-ares", "libffi", "nghttp2", "libarchive", "pcre2", "libxml2", "nginx",
)  # fmt: skip
_CPP_SOURCES = (
    "fmtlib", "leveldb", "re2", "pugixml", "tinyxml2", "snappy", "double-conversion", "flatbuffers",
    "cpp-httplib", "yaml-cpp", "google-glog", "gflags", "benchmark", "ninja-build", "protobuf",
)  # fmt: skip
# Named by binary package: apt-get source finds the source package behind it.
_JAVA_SOURCES = (
    "libcommons-lang3-java", "libcommons-io-java", "libcommons-collections4-java", "libcommons-text-java",
    "libcommons-cli-java", "libcommons-codec-java", "libcommons-compress-java", "libcommons-math3-java",
    "libguava-java", "libjackson2-core-java", "libjackson2-databind-java", "libgoogle-gson-java",
    "libjoda-time-java", "libjsoup-java", "libslf4j-java", "libnetty-java", "libantlr4-runtime-java",
    "libpicocli-java", "libmockito-java", "libassertj-core-java", "libhttpclient-java", "libjline3-java",
    "libjavaparser-java",
)  # fmt: skip

# Debian packages, most valuable first within each language.
DEBIAN_SPECS: tuple[DebianSpec, ...] = (
    # The Go tree's test/ folder holds compiler test cases (often invalid on purpose): src/ only.
    DebianSpec(
        "golang-1.19-src", ("go", "c"), strip=r"^usr/share/go-[^/]+/", include=("usr/share/go-*/src/*",)
    ),
    # rust-src ships the whole rustc tree; its src/ is mostly the UI test suite.
    DebianSpec(
        "rust-src",
        ("rust",),
        strip=r"^usr/src/rustc-[^/]+/",
        include=("usr/src/rustc-*/library/*", "usr/src/rustc-*/compiler/*"),
    ),
    *(DebianSpec(name, ("lua",)) for name in _LUA_BINARIES),
    *(DebianSpec(name, ("bash",)) for name in _BASH_BINARIES),
    DebianSpec("googletest", ("cpp",), cpp_headers=True),
    *(DebianSpec(name, ("cpp",), cpp_headers=True) for name in _CPP_HEADER_BINARIES),
    *(DebianSpec(name, ("c", "lua", "bash"), source=True) for name in _C_SOURCES),
    *(DebianSpec(name, ("cpp", "c"), cpp_headers=True, source=True) for name in _CPP_SOURCES),
    *(DebianSpec(name, ("java",), source=True) for name in _JAVA_SOURCES),
)
