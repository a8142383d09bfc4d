"""Training-corpus builder for the bundled completion model.

Gathers source files that are available offline under permissive licenses only, filters out
generated/minified/vendored/data-like files, removes exact and near duplicates, drops every file
that overlaps the evaluation benchmarks, and writes JSONL shards split into train and valid by file.

    python -m engine.corpus build --out data/corpus --langs python
    python -m engine.corpus build --out data/corpus --langs javascript,typescript,go,rust,lua,c,cpp,bash

Each build rewrites the shards of the languages it was asked for and keeps the others, so the
corpus can be widened language by language. Downloads are cached under --cache (default
data/cache) so that a rebuild runs offline. See engine/corpus_sources.md.
"""

from __future__ import annotations

import argparse
import email.parser
import fnmatch
import gzip
import hashlib
import io
import json
import logging
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger("engine.corpus")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BENCHMARKS = REPO_ROOT.parent / "shared" / "benchmarks"

ALL_LANGS = ("python", "javascript", "typescript", "go", "rust", "lua", "c", "cpp", "java", "bash")

# Extension -> language. ".h" is decided per source (C unless the source says C++).
EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".lua": "lua",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".java": "java",
    ".sh": "bash",
    ".bash": "bash",
}

MAX_FILE_BYTES = 200_000
MAX_LINE_CHARS = 500
MIN_FILE_BYTES = 64
SHARD_BYTES = 64 * 1024 * 1024


# --------------------------------------------------------------------------------------------
# Licenses
# --------------------------------------------------------------------------------------------

# Canonical ids we accept. CC0 and public domain are more permissive than MIT (SQLite is one).
PERMISSIVE = frozenset(
    {
        "MIT",
        "MIT-0",
        "BSD-2-Clause",
        "BSD-3-Clause",
        "BSD",
        "Apache-2.0",
        "ISC",
        "PSF-2.0",
        "Python-2.0",
        "Unlicense",
        "Zlib",
        "0BSD",
        "CC0-1.0",
        "public-domain",
        "Unicode-DFS-2016",
    }
)

# Lower-cased aliases seen in SPDX, PyPI free text, npm and Debian short names.
_ALIASES: dict[str, str] = {
    "mit": "MIT",
    "mit license": "MIT",
    "the mit license": "MIT",
    "mit licence": "MIT",
    "expat": "MIT",
    "mit-0": "MIT-0",
    "mit no attribution license (mit-0)": "MIT-0",
    "bsd": "BSD",
    "bsd license": "BSD",
    "bsd licence": "BSD",
    "new bsd": "BSD-3-Clause",
    "new bsd license": "BSD-3-Clause",
    "modified bsd": "BSD-3-Clause",
    "modified bsd license": "BSD-3-Clause",
    "bsd-3-clause": "BSD-3-Clause",
    "bsd 3-clause": "BSD-3-Clause",
    "bsd-3": "BSD-3-Clause",
    "3-clause bsd": "BSD-3-Clause",
    "3-clause bsd license": "BSD-3-Clause",
    "bsd 3-clause license": "BSD-3-Clause",
    "bsd-3-clause license": "BSD-3-Clause",
    "bsd (3 clause)": "BSD-3-Clause",
    "bsd-2-clause": "BSD-2-Clause",
    "bsd 2-clause": "BSD-2-Clause",
    "bsd-2": "BSD-2-Clause",
    "2-clause bsd": "BSD-2-Clause",
    "simplified bsd": "BSD-2-Clause",
    "freebsd": "BSD-2-Clause",
    "apache": "Apache-2.0",
    "apache-2.0": "Apache-2.0",
    "apache 2.0": "Apache-2.0",
    "apache 2": "Apache-2.0",
    "apache2": "Apache-2.0",
    "apache-2": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "apache license, version 2.0": "Apache-2.0",
    "apache license version 2.0": "Apache-2.0",
    "apache software license": "Apache-2.0",
    "apache software license 2.0": "Apache-2.0",
    "apache 2.0 license": "Apache-2.0",
    "apache license": "Apache-2.0",
    "asl 2.0": "Apache-2.0",
    "isc": "ISC",
    "isc license": "ISC",
    "isc license (iscl)": "ISC",
    "iscl": "ISC",
    "psf": "PSF-2.0",
    "psf-2": "PSF-2.0",
    "psf-2.0": "PSF-2.0",
    "psfl": "PSF-2.0",
    "psf license": "PSF-2.0",
    "python software foundation license": "PSF-2.0",
    "python": "Python-2.0",
    "python-2.0": "Python-2.0",
    "unlicense": "Unlicense",
    "the unlicense": "Unlicense",
    "the unlicense (unlicense)": "Unlicense",
    "zlib": "Zlib",
    "zlib/libpng": "Zlib",
    "zlib/libpng license": "Zlib",
    "0bsd": "0BSD",
    "cc0": "CC0-1.0",
    "cc0-1.0": "CC0-1.0",
    "public-domain": "public-domain",
    "public domain": "public-domain",
    "unicode-dfs-2016": "Unicode-DFS-2016",
    # Debian short names for permissive texts.
    "go": "BSD-3-Clause",  # the Go license is BSD-3-Clause
    "x11": "MIT",
    "mit/x11": "MIT",
    "mit/x": "MIT",
    "mit-x11": "MIT",
    "public-domain-sqlite": "public-domain",
}

# Names of copyleft or otherwise unwanted licenses; any hit rejects. Word-bounded so that words like
# "implied" or "replace" in a permissive text do not match "mpl" or "epl".
_REJECT = re.compile(
    r"\b(?:[al]?gpl|[al]?gplv?\d|gnu|mpl|mozilla|epl|eclipse public|cddl|eupl|sspl|busl|commons clause"
    r"|proprietary|cc-by-sa|cc-by-nc|artistic|osl|non-commercial)",
    re.IGNORECASE,
)

_EXPR_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def canonical_license(name: str) -> str | None:
    """Map one license id or short name to its canonical permissive id, or None."""
    key = name.strip().strip(".,;").lower()
    key = re.sub(r"\s+", " ", key)
    if key.endswith("+"):  # "Apache-2.0+" style: the "or later" of a permissive license is fine
        key = key[:-1]
    key = re.sub(r"[- ]with[- ]llvm[- ]exception$", "", key)  # an exception only adds permissions
    if key in _ALIASES:
        return _ALIASES[key]
    for pid in PERMISSIVE:
        if key == pid.lower():
            return pid
    # Debian names variants of a permissive text after their origin: "BSD-3-clause-svgpan",
    # "BSD-3-Clause~Google", "BSD-3-google", "MIT-1".
    for base, lic in (("bsd-3", "BSD-3-Clause"), ("bsd-2", "BSD-2-Clause"), ("expat", "MIT"), ("mit", "MIT")):
        if key.startswith((base + "-", base + "~")):
            return lic
    for base in ("isc", "zlib", "apache-2.0"):
        if key.startswith(base + "~"):
            return _ALIASES[base]
    return None


def is_rejected_text(text: str) -> bool:
    return _REJECT.search(text) is not None


class _ExprParser:
    """Recursive descent over SPDX-like expressions: OR binds looser than AND; WITH attaches."""

    def __init__(self, text: str) -> None:
        # Debian writes "MIT or Apache-2.0" and "GPL-2+ and BSD"; commas mean "and" there.
        self.tokens = _EXPR_TOKEN.findall(text.replace(",", " and "))
        self.pos = 0

    def parse(self) -> str | None:
        result = self._or()
        if self.pos != len(self.tokens):
            raise ValueError("trailing tokens")
        return result

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _or(self) -> str | None:
        options = [self._and()]
        while (tok := self._peek()) is not None and tok.lower() == "or":
            self.pos += 1
            options.append(self._and())
        accepted = [o for o in options if o is not None]
        # Under OR we may pick any alternative: keep the first permissive one.
        return accepted[0] if accepted else None

    def _and(self) -> str | None:
        parts = [self._atom()]
        while (tok := self._peek()) is not None and tok.lower() == "and":
            self.pos += 1
            parts.append(self._atom())
        if any(p is None for p in parts):
            return None
        unique = list(dict.fromkeys(p for p in parts if p is not None))
        return " AND ".join(unique)

    def _atom(self) -> str | None:
        tok = self._peek()
        if tok is None:
            raise ValueError("unexpected end")
        self.pos += 1
        if tok == "(":
            inner = self._or()
            if self._peek() != ")":
                raise ValueError("missing )")
            self.pos += 1
            return f"({inner})" if inner and " AND " in inner else inner
        if tok == ")" or tok.lower() in ("and", "or", "with"):
            raise ValueError(f"unexpected {tok}")
        verdict = canonical_license(tok)
        if (nxt := self._peek()) is not None and nxt.lower() == "with":
            # Exceptions only add permissions; Debian writes them as several words.
            self.pos += 1
            while (t := self._peek()) is not None and t.lower() not in ("and", "or", ")"):
                self.pos += 1
        return verdict


def parse_license_expression(expr: str) -> str | None:
    """Canonical permissive license for an SPDX-like expression, None if not permissive."""
    try:
        return _ExprParser(expr).parse()
    except ValueError:
        return None


# Recognisable phrases of full license texts pasted into a metadata field.
_TEXT_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("permission is hereby granted, free of charge", "MIT"),
    ("redistribution and use in source and binary forms", "BSD"),
    ("apache license", "Apache-2.0"),
    ("permission to use, copy, modify, and/or distribute this software for any purpose", "ISC"),
    ("this is free and unencumbered software released into the public domain", "Unlicense"),
    ("python software foundation license", "PSF-2.0"),
)


def classify_license_text(text: str) -> str | None:
    """Classify a free-text license field (an id, a name, an expression or a whole text)."""
    text = text.strip()
    if not text or text.upper() in ("UNKNOWN", "NONE", "SEE LICENSE", "OTHER"):
        return None
    if len(text) <= 80 and "\n" not in text:
        if (direct := canonical_license(text)) is not None:
            return direct
        if not is_rejected_text(text) and (expr := parse_license_expression(text)) is not None:
            return expr
    if is_rejected_text(text):
        return None
    low = re.sub(r"\s+", " ", text.lower())
    if "advertising materials" in low:
        return None  # 4-clause BSD: not on our list
    # A pasted text may hold several licenses (bundled parts): name them all.
    found = [lic for phrase, lic in _TEXT_TEMPLATES if phrase in low]
    return " AND ".join(dict.fromkeys(found)) if found else None


_CLASSIFIER_PREFIX = "License :: "


def classify_classifier(classifier: str) -> tuple[bool, str | None]:
    """(is_license_classifier, canonical id or None) for one trove classifier."""
    if not classifier.startswith(_CLASSIFIER_PREFIX):
        return False, None
    leaf = classifier.split("::")[-1].strip()
    if leaf in ("OSI Approved", "License", "DFSG approved"):
        return False, None  # says nothing about which license
    if leaf == "Public Domain":
        return True, "public-domain"
    return True, canonical_license(leaf)


@dataclass(frozen=True)
class LicenseVerdict:
    license: str | None  # canonical permissive id, None when rejected
    reason: str  # how it was decided, for the manifest

    @property
    def accepted(self) -> bool:
        return self.license is not None


def license_from_wheel_metadata(metadata: str) -> LicenseVerdict:
    """Judge a wheel's METADATA: License-Expression wins; otherwise License and classifiers
    must agree (any copyleft or unknown signal next to a permissive one rejects)."""
    msg = email.parser.HeaderParser().parsestr(metadata)
    expr = msg.get("License-Expression")
    if expr:
        lic = parse_license_expression(expr)
        return LicenseVerdict(lic, f"License-Expression: {expr}")
    signals: list[tuple[str, str | None]] = []
    raw = msg.get("License") or ""
    if raw.strip() and raw.strip().upper() != "UNKNOWN":
        signals.append((f"License: {raw.strip()[:60]}", classify_license_text(raw)))
    for classifier in msg.get_all("Classifier") or []:
        is_lic, lic = classify_classifier(classifier)
        if is_lic:
            signals.append((classifier, lic))
    return _combine_signals(signals)


def _combine_signals(signals: list[tuple[str, str | None]]) -> LicenseVerdict:
    if not signals:
        return LicenseVerdict(None, "no license metadata")
    rejected = [desc for desc, lic in signals if lic is None]
    if rejected:
        return LicenseVerdict(None, f"not permissive: {rejected[0]}")
    # Prefer the most specific id (e.g. BSD-3-Clause over the bare BSD classifier).
    ids = [lic for _, lic in signals if lic is not None]
    specific = [i for i in ids if i != "BSD"]
    chosen = specific[0] if specific else ids[0]
    return LicenseVerdict(chosen, "; ".join(desc for desc, _ in signals)[:200])


def license_from_package_json(pkg: dict[str, object]) -> LicenseVerdict:
    """Judge an npm package.json: `license` (SPDX expression) or the legacy `licenses` list."""
    value = pkg.get("license")
    if isinstance(value, dict):
        value = value.get("type")
    if isinstance(value, str) and value.strip():
        return LicenseVerdict(parse_license_expression(value), f"package.json license: {value}")
    legacy = pkg.get("licenses")
    if isinstance(legacy, list) and legacy:
        signals: list[tuple[str, str | None]] = []
        for item in legacy:
            name = item.get("type") if isinstance(item, dict) else item
            if isinstance(name, str):
                signals.append((f"licenses: {name}", canonical_license(name)))
        # A legacy list means "any of these": accept when one is permissive.
        good = [lic for _, lic in signals if lic]
        if good:
            return LicenseVerdict(good[0], signals[0][0])
        return LicenseVerdict(None, "licenses: none permissive")
    return LicenseVerdict(None, "no license field")


# --- Debian machine-readable copyright (DEP-5) ----------------------------------------------


@dataclass(frozen=True)
class Dep5Stanza:
    patterns: tuple[str, ...]
    license: str  # the short-name line as written
    text: str = ""  # the license text, when the stanza carries one


@dataclass
class Dep5Copyright:
    stanzas: list[Dep5Stanza]
    texts: dict[str, str] = field(default_factory=dict)  # standalone License paragraphs by name

    @classmethod
    def parse(cls, text: str) -> Dep5Copyright | None:
        """None when the file is not machine-readable (then the license is unknown)."""
        paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
        if not paragraphs or not re.search(r"^Format:", paragraphs[0], re.M):
            return None
        stanzas: list[Dep5Stanza] = []
        texts: dict[str, str] = {}
        for para in paragraphs:
            fields = _dep5_fields(para)
            if "license" not in fields:
                continue
            short, _, body = fields["license"].partition("\n")
            if "files" in fields:
                stanzas.append(Dep5Stanza(tuple(fields["files"].split()), short.strip(), body))
            elif short.strip() and body.strip():
                texts[short.strip().lower()] = body
        return cls(stanzas, texts) if stanzas else None

    def license_for(self, source_path: str) -> LicenseVerdict:
        """The last matching stanza wins (DEP-5 rule); '*' matches across '/'."""
        match: Dep5Stanza | None = None
        for stanza in self.stanzas:
            # Installed paths can sit below the upstream tree ("usr/share/lua/5.1/pl/x.lua" for
            # "lua/pl/x.lua"), so a pattern also matches as a path suffix.
            if any(
                fnmatch.fnmatchcase(source_path, pat) or fnmatch.fnmatchcase(source_path, f"*/{pat}")
                for pat in stanza.patterns
            ):
                match = stanza
        if match is None:
            return LicenseVerdict(None, "no copyright stanza matches")
        if not match.license:  # no short name: judge the text itself
            return LicenseVerdict(classify_license_text(match.text), "License: (text only)")
        lic = parse_license_expression(match.license)
        if lic is None and not is_rejected_text(match.license):
            # A name of Debian's own ("Lucent", "BSD-3-Clause~Google"): judge the text it names.
            text = match.text or self.texts.get(match.license.lower(), "")
            lic = classify_license_text(text) if text.strip() else None
        return LicenseVerdict(lic, f"License: {match.license}")


def _dep5_fields(paragraph: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    key = None
    for line in paragraph.splitlines():
        if line[:1] in (" ", "\t") and key is not None:
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
    return fields


# --------------------------------------------------------------------------------------------
# File filters
# --------------------------------------------------------------------------------------------

_VENDOR_DIRS = frozenset(
    {"_vendor", "vendor", "vendored", "_vendored", "third_party", "thirdparty", "node_modules", "externals"}
)
# Generated-file markers, matched in the first lines of a file. Prose in docstrings ("the tree
# generated by the parser") must not count, so most patterns need a file-level subject, an
# "auto"/"machine" qualifier, or a comment line that starts with "generated by".
_GENERATED_ANYWHERE = re.compile(r"\bdo not edit\b|@generated\b", re.IGNORECASE)
_GENERATED_SUBJECT = re.compile(
    r"^(?:(?:this|the) )?(?:file|code|module)\b.{0,40}\bgenerated\b"
    r"|^(?:auto-?|automatically |machine[- ])generated\b",
    re.IGNORECASE,
)
_GENERATED_COMMENT = re.compile(r"^generated (?:by|from|with)\b", re.IGNORECASE)
_COMMENT_START = re.compile(r"^(?:#+|//+|/\*+|\*+|--+|;+)\s*")
_DOCSTRING_START = re.compile(r"^(?:[rRbBuU]?\"\"\"|[rRbBuU]?\'\'\')\s*")
_STRING_LIT = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")


# Fixtures: inputs for parsers and linters, often broken on purpose.
_TESTDATA_DIRS = frozenset({"testdata", "test_data", "__fixtures__"})
# Markers of a transpiler's or bundler's output: the readable source lives elsewhere.
_COMPILED = re.compile(
    r"^//# sourceMappingURL=|Object\.defineProperty\(exports, \"__esModule\"|^exports\.__esModule = true"
    r"|\b__awaiter\b|\b__generator\b|\b_interopRequireDefault\b|\b__webpack_require__\b",
    re.MULTILINE,
)


def looks_compiled(text: str) -> bool:
    return _COMPILED.search(text) is not None


def is_vendored(path: str) -> bool:
    return any(part.lower() in _VENDOR_DIRS for part in Path(path).parts[:-1])


def is_minified_name(path: str) -> bool:
    name = Path(path).name.lower()
    return ".min." in name or name.endswith(("-min.js", ".bundle.js", ".umd.js"))


def looks_generated(text: str) -> bool:
    for raw in text.splitlines()[:30]:
        line = raw.strip()
        if _GENERATED_ANYWHERE.search(line):
            return True
        body = _COMMENT_START.sub("", line)
        is_comment = body != line
        body = _DOCSTRING_START.sub("", body)
        if _GENERATED_SUBJECT.search(body) or (is_comment and _GENERATED_COMMENT.search(body)):
            return True
    return False


def looks_like_data(text: str) -> bool:
    """Mostly numbers or string literals: tables, fixtures, embedded blobs."""
    dense = re.sub(r"\s+", "", text)
    if not dense:
        return True
    digits = sum(ch.isdigit() for ch in dense)
    strings = sum(len(m.group()) for m in _STRING_LIT.finditer(text))
    alpha = sum(ch.isalpha() for ch in dense)
    if digits / len(dense) > 0.35:
        return True
    if (strings + digits) / len(dense) > 0.75:
        return True
    return alpha / len(dense) < 0.25


def reject_reason(path: str, language: str, text: str) -> str | None:
    """Why a decoded file should not be trained on, or None to keep it."""
    if is_vendored(path):
        return "vendored"
    if _TESTDATA_DIRS & {part.lower() for part in Path(path).parts[:-1]}:
        return "test_data"
    if is_minified_name(path):
        return "minified"
    if len(text.encode("utf-8")) < MIN_FILE_BYTES or len(text.strip().splitlines()) < 3:
        return "too_small"
    lines = text.splitlines()
    if max(len(line) for line in lines) > MAX_LINE_CHARS:
        return "minified" if language in ("javascript", "typescript") else "long_lines"
    if looks_generated(text):
        return "generated"
    if language in ("javascript", "typescript") and looks_compiled(text):
        return "compiled"
    if looks_like_data(text):
        return "data_like"
    return None


def decode_source(raw: bytes) -> str | None:
    """UTF-8 text with normalized newlines, or None (binary or another encoding)."""
    if b"\x00" in raw:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


# --------------------------------------------------------------------------------------------
# Deduplication
# --------------------------------------------------------------------------------------------


def normalized_lines(text: str) -> list[str]:
    """Whitespace-insensitive lines: what survives reformatting or re-indentation."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def exact_key(text: str) -> str:
    return hashlib.sha1("\n".join(normalized_lines(text)).encode("utf-8")).hexdigest()


class MinHashDeduper:
    """Near-duplicate detection with MinHash over shingles of k consecutive normalized lines,
    banded LSH to find candidates and a signature check to confirm them.

    Line shingles (not token shingles) because code copies differ by whole edited lines (a
    changed import, a version string, a renamed function) and lines are cheap to hash. With 64
    permutations in 16 bands of 4 a pair at Jaccard 0.8 becomes a candidate with probability
    > 0.999; candidates are kept only when the estimated Jaccard reaches `threshold`.
    """

    _PRIME = (1 << 61) - 1

    def __init__(self, num_perm: int = 64, bands: int = 16, shingle: int = 3, threshold: float = 0.8):
        if num_perm % bands:
            raise ValueError("num_perm must be a multiple of bands")
        rng = np.random.default_rng(20261202)
        self.a = rng.integers(1, 1 << 29, size=num_perm, dtype=np.uint64)
        self.b = rng.integers(0, 1 << 29, size=num_perm, dtype=np.uint64)
        self.bands = bands
        self.rows = num_perm // bands
        self.shingle = shingle
        self.threshold = threshold
        self.buckets: list[dict[bytes, int]] = [{} for _ in range(bands)]
        self.signatures: list[np.ndarray] = []

    def signature(self, text: str) -> np.ndarray:
        lines = normalized_lines(text)
        k = self.shingle
        grams = ["\n".join(lines[i : i + k]) for i in range(max(1, len(lines) - k + 1))]
        hashes = np.fromiter({zlib.crc32(g.encode("utf-8")) for g in grams}, dtype=np.uint64, count=-1)
        # a < 2**29 and x < 2**32 keep a*x + b below 2**61: no uint64 overflow.
        values = (self.a[:, None] * hashes[None, :] + self.b[:, None]) % np.uint64(self._PRIME)
        return values.min(axis=1)

    def add_if_new(self, text: str) -> bool:
        """Register the text unless it near-duplicates one already added; True if registered."""
        sig = self.signature(text)
        keys = [sig[i * self.rows : (i + 1) * self.rows].tobytes() for i in range(self.bands)]
        seen: set[int] = set()
        for band, key in enumerate(keys):
            other = self.buckets[band].get(key)
            if other is None or other in seen:
                continue
            seen.add(other)
            if float(np.mean(self.signatures[other] == sig)) >= self.threshold:
                return False
        idx = len(self.signatures)
        self.signatures.append(sig)
        for band, key in enumerate(keys):
            self.buckets[band].setdefault(key, idx)
        return True


# --------------------------------------------------------------------------------------------
# Decontamination
# --------------------------------------------------------------------------------------------

DECONTAM_SHINGLE = 8  # consecutive significant lines
DECONTAM_MIN_LINE = 8  # characters; shorter lines ("}", "else:", "return x") are too common
DECONTAM_LONG_LINE = 50  # characters; a line this long is nearly a fingerprint
DECONTAM_MIN_SNIPPET = 120  # characters a short program needs before it is indexed whole
# A shingle found in this many distinct benchmark programs is boilerplate (a license header, the
# MultiPL-E Java imports), not evidence: indexing it would flag every file with the same header.
DECONTAM_GENERIC_DF = 5


# Import blocks are sorted boilerplate that unrelated files share (8 java.io imports in a row).
_IMPORT_LINE = re.compile(r"^(?:import|from \S+ import|#\s*include|#import|using|package)\b")


def significant_lines(text: str) -> list[str]:
    return [
        line
        for line in normalized_lines(text)
        if len(line) >= DECONTAM_MIN_LINE and not _IMPORT_LINE.match(line)
    ]


def _hash64(text: str) -> int:
    # 64 bits: with ~10^5 benchmark shingles and ~10^7 corpus windows, 32-bit hashes would
    # collide hundreds of times and drop innocent files.
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def window_shingles(lines: list[str]) -> set[int]:
    """Hashes of every run of DECONTAM_SHINGLE significant lines; a short program whole."""
    k = DECONTAM_SHINGLE
    if len(lines) >= k:
        return {_hash64("\n".join(lines[i : i + k])) for i in range(len(lines) - k + 1)}
    if len(lines) >= 3 and sum(map(len, lines)) >= DECONTAM_MIN_SNIPPET:
        return {_hash64("\n".join(lines))}
    return set()


def long_line_hashes(lines: list[str]) -> set[int]:
    return {_hash64(line) for line in lines if len(line) >= DECONTAM_LONG_LINE}


# Benchmarks built from HumanEval, whose prompts (signature + docstring) get copied on their own.
# SAFIM's programs are ordinary repository files: their long lines are shared with much real code
# (e.g. BERT layers), so only runs of lines count there.
LONG_LINE_BENCHMARKS = frozenset({"human-eval-infilling", "santacoder-fim", "cody-humaneval"})


@dataclass
class BenchmarkIndex:
    """Fingerprints of every benchmark program. A corpus file is contaminated when it shares a run
    of 8 significant lines (or a whole short program) with one, or at least two long lines of a
    HumanEval-derived one: that rule catches a prompt (signature and docstring) copied alone."""

    windows: dict[int, str] = field(default_factory=dict)  # shingle -> benchmark name
    long_lines: dict[int, str] = field(default_factory=dict)
    widths: set[int] = field(default_factory=lambda: {DECONTAM_SHINGLE})  # window sizes indexed
    programs: int = 0

    @classmethod
    def from_texts(cls, texts: dict[str, Iterable[str]]) -> BenchmarkIndex:
        return cls.from_programs((name, text) for name, items in texts.items() for text in items)

    @classmethod
    def from_folder(cls, folder: Path) -> BenchmarkIndex:
        return cls.from_programs(benchmark_programs(folder))

    @classmethod
    def from_programs(cls, programs: Iterable[tuple[str, str]]) -> BenchmarkIndex:
        """Index distinct programs; infill variants of one program (same full text) count once."""
        index = cls()
        owner: dict[int, str] = {}
        window_df: Counter[int] = Counter()
        line_df: Counter[int] = Counter()
        seen: set[int] = set()
        for name, text in programs:
            lines = significant_lines(text)
            key = _hash64("\n".join(lines))  # variants differ in blank lines and indentation
            if key in seen:
                continue
            seen.add(key)
            index.programs += 1
            if 3 <= len(lines) < DECONTAM_SHINGLE:
                index.widths.add(len(lines))
            longs = long_line_hashes(lines) if name in LONG_LINE_BENCHMARKS else set()
            for table, df, hashes in (
                (index.windows, window_df, window_shingles(lines)),
                (index.long_lines, line_df, longs),
            ):
                for h in hashes:
                    df[h] += 1
                    owner.setdefault(h, name)
                    table[h] = owner[h]
        for table, df in ((index.windows, window_df), (index.long_lines, line_df)):
            for h, n in df.items():
                if n >= DECONTAM_GENERIC_DF:
                    del table[h]
        return index

    def hit(self, text: str) -> str | None:
        """Name of the benchmark this file overlaps, or None."""
        lines = significant_lines(text)
        for width in sorted(self.widths, reverse=True):
            for i in range(len(lines) - width + 1):
                if (name := self.windows.get(_hash64("\n".join(lines[i : i + width])))) is not None:
                    return name
        matched = [self.long_lines[h] for h in long_line_hashes(lines) if h in self.long_lines]
        return matched[0] if len(matched) >= 2 else None


def _read_jsonl(path: Path) -> Iterator[dict[str, object]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _s(row: dict[str, object], key: str) -> str:
    value = row.get(key)
    return value if isinstance(value, str) else ""


def _program(benchmark: str, row: dict[str, object]) -> str:
    """The whole original program of one benchmark row (prefix + middle + suffix, with tests)."""
    if benchmark == "human-eval-infilling":
        return _s(row, "prompt") + _s(row, "canonical_solution") + _s(row, "suffix") + "\n" + _s(row, "test")
    if benchmark == "safim":
        return _s(row, "eval_prompt").replace("{{completion}}", _s(row, "ground_truth"))
    if benchmark == "santacoder-fim":
        parts = (_s(row, "prompt"), _s(row, "canonical_solution"), _s(row, "suffix"), _s(row, "tests"))
        return "\n".join(parts)
    return _s(row, "prefix") + _s(row, "middle") + _s(row, "suffix") + "\n" + _s(row, "test")


BENCHMARKS = ("human-eval-infilling", "safim", "santacoder-fim", "cody-humaneval")


def benchmark_programs(folder: Path) -> Iterator[tuple[str, str]]:
    """(benchmark, program) for every row of every benchmark file in the folder."""
    for benchmark in BENCHMARKS:
        for path in sorted((folder / benchmark).glob("*.jsonl*")):
            for row in _read_jsonl(path):
                yield benchmark, _program(benchmark, row)


# --------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    path: str  # "<source>/<path inside it>": unique across the corpus
    language: str
    raw: bytes
    license: str
    drop: str | None = None  # decided by the source itself (file license, compiled output)


@dataclass
class SourceInfo:
    """What the manifest records about one source (package, stdlib, Debian package)."""

    name: str
    kind: str  # stdlib | pypi | npm | debian
    version: str = ""
    license: str = ""
    license_evidence: str = ""
    skipped: str = ""  # why nothing was taken from it
    files: Counter[str] = field(default_factory=Counter)  # per language, kept files
    bytes: Counter[str] = field(default_factory=Counter)


_SHEBANGS = (("node", "javascript"), ("python", "python"), ("lua", "lua"), ("bash", "bash"), ("sh", "bash"))


Source = tuple[SourceInfo, Iterator[Candidate]]  # what the manifest says, and the files


def language_of(path: str, cpp_headers: bool = False, head: bytes = b"") -> str | None:
    """Language by extension; an extensionless script by its #! line."""
    lower = path.lower()
    if lower.endswith(".d.ts"):
        return "typescript"
    suffix = Path(lower).suffix
    lang = EXTENSIONS.get(suffix)
    if lang == "c" and suffix == ".h" and cpp_headers:
        return "cpp"
    if lang is None and not suffix and head.startswith(b"#!"):
        words = re.findall(r"[a-z]+", head.split(b"\n", 1)[0].decode("latin-1").lower())
        for word, shebang_lang in _SHEBANGS:
            if word in words:
                return shebang_lang
    return lang


_TEST_DIRS = frozenset({"test", "tests", "idle_test"})


def stdlib_files(stdlib: Path, langs: set[str]) -> Source:
    """CPython's pure-Python standard library, without its test suites (PSF license)."""
    version = ".".join(map(str, sys.version_info[:3]))
    info = SourceInfo(f"cpython-{version}", "stdlib", version, "PSF-2.0", "CPython LICENSE.txt (PSF-2.0)")

    def walk() -> Iterator[Candidate]:
        if "python" not in langs:
            return
        for path in sorted(stdlib.rglob("*.py")):
            rel = path.relative_to(stdlib)
            top = rel.parts[0]
            if top in ("site-packages", "lib-dynload", "__pycache__") or top.startswith(
                ("config-", "_sysconfigdata")
            ):
                continue
            if _TEST_DIRS & set(rel.parts[:-1]):
                continue
            yield Candidate(f"{info.name}/{rel.as_posix()}", "python", path.read_bytes(), info.license)

    return info, walk()


def _normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _version_key(version: str) -> tuple[object, ...]:
    try:
        from packaging.version import Version

        return (1, Version(version))
    except Exception:  # not PEP 440: sort such versions first
        return (0, version)


def cached_wheel(name: str, cache: Path) -> Path | None:
    norm = _normalize_dist(name)
    found = [p for p in cache.glob("*.whl") if _normalize_dist(p.name.split("-")[0]) == norm]
    if not found:
        return None
    return max(found, key=lambda p: _version_key(p.name.split("-")[1]))


def fetch_wheel(name: str, cache: Path, offline: bool) -> Path | None:
    """The newest cached wheel of `name`, downloading it with pip when missing."""
    cache.mkdir(parents=True, exist_ok=True)
    if (hit := cached_wheel(name, cache)) is not None or offline:
        return hit
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    cmd += ["--python-version", "3.11", "--quiet", "-d", str(cache), name]
    if not _run_fetch(cmd, name):
        return None
    return cached_wheel(name, cache)


def _run_fetch(cmd: list[str], what: str, cwd: Path | None = None) -> bool:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("skip %s: cannot fetch (%s)", what, exc)
        return False
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
        log.warning("skip %s: fetch failed: %s", what, tail[0])
        return False
    return True


def wheel_files(name: str, cache: Path, offline: bool, langs: set[str]) -> Source:
    info = SourceInfo(name, "pypi")
    if "python" not in langs:
        info.skipped = "language not requested"
        return info, iter(())
    wheel = fetch_wheel(name, cache, offline)
    if wheel is None:
        info.skipped = "not fetched"
        return info, iter(())
    info.version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as zf:
        meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
        verdict = license_from_wheel_metadata(zf.read(meta).decode("utf-8", "replace")) if meta else None
    if verdict is None:
        info.skipped = "wheel without METADATA"
        return info, iter(())
    info.license_evidence = verdict.reason
    if not verdict.accepted:
        info.skipped = f"license: {verdict.reason}"
        return info, iter(())
    info.license = verdict.license or ""

    def walk() -> Iterator[Candidate]:
        with zipfile.ZipFile(wheel) as zf:
            for member in sorted(zf.namelist()):
                if not member.endswith(".py") or ".dist-info/" in member:
                    continue
                yield Candidate(f"{name}-{info.version}/{member}", "python", zf.read(member), info.license)

    return info, walk()


# --- npm ------------------------------------------------------------------------------------

# Directories of build output in npm tarballs (bundles, UMD builds); readable sources live beside.
_BUILD_DIRS = frozenset(
    {"dist", "umd", "bundle", "bundles", "build", "min", "fesm2015", "fesm2020", "fesm2022"}
)


def _npm_stem(name: str) -> str:
    """npm pack names "@scope/pkg" as "scope-pkg-<version>.tgz"."""
    return name.lstrip("@").replace("/", "-")


def cached_npm(name: str, cache: Path) -> Path | None:
    pattern = re.compile(rf"^{re.escape(_npm_stem(name))}-(\d[^/]*)\.tgz$")
    found = [(m.group(1), p) for p in cache.glob("*.tgz") if (m := pattern.match(p.name))]
    if not found:
        return None
    return max(found, key=lambda vp: _version_key(vp[0]))[1]


def fetch_npm(name: str, cache: Path, offline: bool) -> Path | None:
    cache.mkdir(parents=True, exist_ok=True)
    if (hit := cached_npm(name, cache)) is not None or offline:
        return hit
    if shutil.which("npm") is None:
        log.warning("skip npm:%s: npm is not installed", name)
        return None
    if not _run_fetch(["npm", "pack", "--silent", name], f"npm:{name}", cwd=cache):
        return None
    return cached_npm(name, cache)


def npm_files(name: str, cache: Path, offline: bool, langs: set[str]) -> Source:
    info = SourceInfo(name, "npm")
    if not langs & {"javascript", "typescript"}:
        info.skipped = "language not requested"
        return info, iter(())
    tgz = fetch_npm(name, cache, offline)
    if tgz is None:
        info.skipped = "not fetched"
        return info, iter(())
    with tarfile.open(tgz) as tf:
        members = [m for m in tf.getmembers() if m.isfile()]
        meta = next((m for m in members if m.name.count("/") == 1 and m.name.endswith("/package.json")), None)
        pkg = json.loads(tf.extractfile(meta).read()) if meta else {}  # type: ignore[union-attr]
    verdict = license_from_package_json(pkg)
    info.version = str(pkg.get("version", ""))
    info.license_evidence = verdict.reason
    if not verdict.accepted:
        info.skipped = f"license: {verdict.reason}"
        return info, iter(())
    info.license = verdict.license or ""

    def walk() -> Iterator[Candidate]:
        with tarfile.open(tgz) as tf:
            files = [m for m in tf.getmembers() if m.isfile()]  # archive order: no gzip re-seeks
            rels = [m.name.split("/", 1)[1] if "/" in m.name else m.name for m in files]
            # In a package written in TypeScript, the .js and .d.ts files are the compiler's output.
            has_ts = any(r.endswith((".ts", ".tsx")) and not r.endswith(".d.ts") for r in rels)
            for member, rel in zip(files, rels, strict=True):
                lang = language_of(rel)
                if lang not in ("javascript", "typescript"):
                    continue
                drop = None
                if {p.lower() for p in Path(rel).parts[:-1]} & _BUILD_DIRS:
                    drop = "build_output"
                elif has_ts and (lang == "javascript" or rel.endswith(".d.ts")):
                    drop = "compiled"
                raw = b"" if drop else tf.extractfile(member).read()  # type: ignore[union-attr]
                yield Candidate(f"{name}-{info.version}/{rel}", lang, raw, info.license, drop)

    return info, walk()


# --- Debian ---------------------------------------------------------------------------------


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


def _included(rel: str, spec: DebianSpec) -> bool:
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
    if not _run_fetch(["apt-get", "download", package], f"debian:{package} (try apt-get update)", cwd=cache):
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
    if not _run_fetch(["dpkg", "-x", str(deb), str(root)], deb.name):
        return None
    (root / ".done").touch()
    return root


def _debian_copyright(root: Path, package: str) -> str | None:
    own = root / "usr/share/doc" / package / "copyright"
    if own.is_file():
        return own.read_text(errors="replace")
    others = sorted(p for p in (root / "usr/share/doc").glob("*/copyright") if p.is_file())
    return others[0].read_text(errors="replace") if others else None


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
    text = _debian_copyright(root, spec.package)
    copyright_ = Dep5Copyright.parse(text) if text else None
    if copyright_ is None:
        info.skipped = "license: no machine-readable debian/copyright"
        return info, iter(())
    main = copyright_.license_for("*")
    info.license = main.license or ""
    info.license_evidence = f"debian/copyright, per file; {main.reason} for Files: *"

    def walk() -> Iterator[Candidate]:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = path.relative_to(root).as_posix()
            if rel.startswith("usr/share/doc/") or not _included(rel, spec):
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
    if not fresh and not _run_fetch(["apt-get", *opts, "update"], "deb-src index"):
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
    if not _run_fetch(cmd, f"debian-src:{package}", folder):
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
    text = _tar_member_text(debian or orig, "debian/copyright")
    copyright_ = Dep5Copyright.parse(text) if text else None
    if copyright_ is None:
        info.skipped = "license: no machine-readable debian/copyright"
        return info, iter(())
    main = copyright_.license_for("*")
    info.license = main.license or ""
    info.license_evidence = f"debian/copyright, per file; {main.reason} for Files: *"

    def walk() -> Iterator[Candidate]:
        with tarfile.open(orig) as tf:
            for member in tf:
                if not member.isfile() or "/" not in member.name:
                    continue
                rel = member.name.split("/", 1)[1]  # drop the "<pkg>-<version>/" top folder
                if rel.startswith("debian/") or not _included(rel, spec):
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


# Popular, well-written pure-Python (or mostly Python) packages. Their wheels' metadata decides the
# license; the copyleft and MPL ones on the list (e.g. hypothesis, certifi, tqdm) are refused there.
PYPI_PACKAGES: tuple[str, ...] = (
    "requests", "urllib3", "idna", "charset-normalizer", "flask", "werkzeug", "jinja2", "markupsafe",
    "itsdangerous", "click", "attrs", "cattrs", "rich", "textual", "httpx", "httpcore", "anyio", "h11",
    "pydantic", "django", "djangorestframework", "numpy", "pandas", "scikit-learn", "sympy", "networkx",
    "more-itertools", "black", "starlette", "fastapi", "typer", "sqlalchemy", "alembic", "pytest",
    "pluggy", "pip", "setuptools", "wheel", "virtualenv", "tox", "nox", "build", "packaging", "pyyaml",
    "tomli", "tomlkit", "marshmallow", "celery", "kombu", "redis", "pymongo", "tornado", "twisted",
    "aiohttp", "yarl", "multidict", "pygments", "jedi", "parso", "mypy", "flake8", "pycodestyle",
    "pyflakes", "isort", "autopep8", "yapf", "coverage", "six", "python-dateutil", "pytz", "arrow",
    "pendulum", "loguru", "structlog", "cachetools", "toolz", "dask", "xarray", "scrapy",
    "beautifulsoup4", "html5lib", "bleach", "markdown", "mistune", "nltk", "transformers", "accelerate",
    "datasets", "peft", "diffusers", "huggingface-hub", "tiktoken", "einops", "jax", "flax", "optax",
    "keras", "openai", "anthropic", "sphinx", "docutils", "jsonschema", "referencing", "uvicorn",
    "gunicorn", "websockets", "bottle", "falcon", "sanic", "tenacity", "wrapt", "decorator", "boltons",
    "funcy", "glom", "pydash", "cerberus", "voluptuous", "schema", "pyparsing", "lark", "ply", "sqlparse",
    "prompt-toolkit", "ipython", "traitlets", "jupyter-client", "nbformat", "pexpect", "ptyprocess",
    "platformdirs", "filelock", "fsspec", "invoke", "fabric", "fire", "docopt", "sh", "plumbum",
    "pyserial", "graphene", "strawberry-graphql", "aiofiles", "mongoengine", "peewee", "elasticsearch",
    "kafka-python", "pika", "google-auth", "oauthlib", "requests-oauthlib", "pyjwt", "passlib", "wtforms",
    "flask-sqlalchemy", "channels", "selenium", "pytest-asyncio", "pytest-cov", "mock", "freezegun",
    "factory-boy", "responses", "vcrpy", "pre-commit", "cookiecutter", "mako", "dataclasses-json",
    "twine", "colorama", "termcolor", "tabulate", "prettytable", "humanize", "inflect", "python-slugify",
    "validators", "email-validator", "dnspython", "netaddr", "pyasn1", "rsa", "ecdsa", "jsonpatch",
    "jsonpointer", "sortedcontainers", "eventlet", "astor", "asttokens", "executing", "stack-data",
    "pure-eval", "icecream", "hy", "statsmodels", "seaborn", "scikit-image", "imageio", "geopandas",
    "folium", "param", "questionary", "blessed", "libcst", "hatchling", "flit-core", "poetry-core", "pdm",
    "pyproject-hooks", "typing-extensions", "mypy-extensions", "matplotlib", "scipy", "bokeh", "sqlmodel",
    "pydantic-settings", "msgpack", "cryptography", "pyopenssl", "paramiko", "tqdm", "certifi",
    "hypothesis", "pylint", "urwid", "unidecode", "pathspec",
)  # fmt: skip


# npm packages under MIT/ISC/BSD/Apache (package.json decides). Bundles and the compiled output of
# TypeScript packages are dropped file by file; typescript itself brings its lib.*.d.ts.
NPM_PACKAGES: tuple[str, ...] = (
    "lodash", "express", "react", "react-dom", "vue", "typescript", "axios", "date-fns", "zod", "chalk",
    "commander", "yargs", "debug", "ms", "semver", "uuid", "minimist", "glob", "rimraf", "fs-extra",
    "async", "bluebird", "dayjs", "rxjs", "immer", "redux", "@reduxjs/toolkit", "react-redux", "mobx",
    "preact", "svelte", "lit", "ramda", "underscore", "jquery", "d3-array", "d3-scale", "d3-shape",
    "d3-selection", "three", "eslint", "webpack", "ws", "socket.io", "koa", "@koa/router", "fastify",
    "body-parser", "cookie", "cors", "jsonwebtoken", "mongoose", "sequelize", "knex", "pg", "ioredis",
    "node-fetch", "undici", "got", "superagent", "cheerio", "jsdom", "js-yaml", "ajv", "joi", "yup",
    "class-validator", "inversify", "tslib", "type-fest", "@types/node", "@types/react",
    "vscode-languageserver", "vscode-languageclient", "vscode-jsonrpc", "vscode-languageserver-protocol",
    "marked", "markdown-it", "highlight.js", "handlebars", "ejs", "mustache", "nunjucks", "inquirer",
    "execa", "globby", "chokidar", "micromatch", "picomatch", "fast-glob", "minimatch", "graceful-fs",
    "lru-cache", "p-limit", "p-queue", "eventemitter3", "core-js", "fp-ts", "effect", "io-ts",
    "@trpc/server", "@tanstack/query-core", "superstruct", "ts-pattern", "csstype", "acorn", "estraverse",
    "esquery", "prettier", "moment", "luxon", "hono", "kysely", "drizzle-orm",
)  # fmt: skip

_LUA_BINARIES = (
    "lua-penlight", "lua-busted", "lua-luassert", "lua-say", "lua-cliargs", "lua-argparse", "lua-dkjson",
    "lua-json", "lua-inspect", "lua-ldoc", "lua-moses", "lua-mediator", "lua-term", "lua-system",
    "lua-socket", "lua-http", "lua-cqueues", "lua-lpeg-patterns", "lua-logging", "lua-markdown",
    "lua-messagepack", "lua-binaryheap", "lua-basexx", "lua-fifo", "lua-compat53", "lua-coxpcall",
    "lua-copas", "lua-check", "lua-unit", "lua-uri", "lua-lgi", "lua-nvim", "lua-resty-core",
    "lua-resty-lrucache", "lua-ansicolors", "lua-cosmo", "lua-wsapi", "lua-inifile", "lua-redis",
    "luarocks", "prosody",
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


# --------------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------------


@dataclass
class BuildConfig:
    out: Path
    cache: Path
    langs: set[str]
    benchmarks: Path
    max_bytes: int | None = None  # per language
    valid_fraction: float = 0.01
    offline: bool = False
    pypi: tuple[str, ...] = PYPI_PACKAGES
    npm: tuple[str, ...] = NPM_PACKAGES
    debian: tuple[DebianSpec, ...] = DEBIAN_SPECS
    stdlib: Path = field(default_factory=lambda: Path(sysconfig.get_paths()["stdlib"]))


@dataclass
class LangStats:
    files: Counter[str] = field(default_factory=Counter)  # per split
    bytes: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)  # per reason
    contaminated: Counter[str] = field(default_factory=Counter)  # per benchmark
    license_files: Counter[str] = field(default_factory=Counter)
    license_bytes: Counter[str] = field(default_factory=Counter)


def split_of(path: str, valid_fraction: float) -> str:
    """Deterministic by file path: a rebuild puts every file in the same split."""
    bucket = int(hashlib.sha1(path.encode("utf-8")).hexdigest()[:8], 16) % 10_000
    return "valid" if bucket < valid_fraction * 10_000 else "train"


class ShardWriter:
    """JSONL shards `<split>/<language>-NNNNN.jsonl`, written as .tmp until committed."""

    def __init__(self, out: Path, split: str, language: str, shard_bytes: int = SHARD_BYTES):
        self.dir = out / split
        self.dir.mkdir(parents=True, exist_ok=True)
        self.prefix = language
        self.shard_bytes = shard_bytes
        self.paths: list[Path] = []
        self._fh: io.TextIOWrapper | None = None
        self._size = 0

    def write(self, record: dict[str, str]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        if self._fh is None or self._size >= self.shard_bytes:
            self._open_next()
        assert self._fh is not None
        self._fh.write(line)
        self._size += len(line.encode("utf-8"))

    def _open_next(self) -> None:
        if self._fh is not None:
            self._fh.close()
        path = self.dir / f"{self.prefix}-{len(self.paths):05d}.jsonl.tmp"
        self.paths.append(path)
        self._fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 (kept open across writes)
        self._size = 0

    def commit(self) -> list[str]:
        """Close, replace this language's previous shards, return the new shard names."""
        if self._fh is not None:
            self._fh.close()
        for old in self.dir.glob(f"{self.prefix}-*.jsonl"):
            old.unlink()
        names = []
        for tmp in self.paths:
            final = tmp.with_suffix("")
            tmp.rename(final)
            names.append(f"{self.dir.name}/{final.name}")
        return names


@dataclass
class Pipeline:
    """Filters, dedups, decontaminates and writes candidates, keeping the counts."""

    cfg: BuildConfig
    index: BenchmarkIndex
    stats: dict[str, LangStats] = field(default_factory=lambda: defaultdict(LangStats))
    exact_seen: set[str] = field(default_factory=set)
    near: dict[str, MinHashDeduper] = field(default_factory=dict)
    writers: dict[tuple[str, str], ShardWriter] = field(default_factory=dict)

    def judge(self, cand: Candidate) -> tuple[str | None, str]:
        """(reason to drop or None, decoded text)."""
        if len(cand.raw) > MAX_FILE_BYTES:
            return "too_large", ""
        text = decode_source(cand.raw)
        if text is None:
            return "not_utf8", ""
        if (reason := reject_reason(cand.path, cand.language, text)) is not None:
            return reason, text
        key = exact_key(text)
        if key in self.exact_seen:
            return "exact_dup", text
        if (bench := self.index.hit(text)) is not None:
            self.stats[cand.language].contaminated[bench] += 1
            return "contaminated", text
        near = self.near.setdefault(cand.language, MinHashDeduper())
        if not near.add_if_new(text):
            return "near_dup", text
        self.exact_seen.add(key)
        return None, text

    def take(self, info: SourceInfo, cand: Candidate) -> None:
        stats = self.stats[cand.language]
        cap = self.cfg.max_bytes
        if cap is not None and sum(stats.bytes.values()) >= cap:
            stats.dropped["over_max_mb"] += 1
            return
        reason, text = (cand.drop, "") if cand.drop else self.judge(cand)
        if reason is not None:
            stats.dropped[reason] += 1
            log.debug("drop %-12s %s", reason, cand.path)
            return
        split = split_of(cand.path, self.cfg.valid_fraction)
        record = {
            "path": cand.path,
            "language": cand.language,
            "source": f"{info.kind}:{info.name}",
            "license": cand.license,
            "text": text,
        }
        key = (split, cand.language)
        if key not in self.writers:
            self.writers[key] = ShardWriter(self.cfg.out, split, cand.language)
        self.writers[key].write(record)
        size = len(text.encode("utf-8"))
        stats.files[split] += 1
        stats.bytes[split] += size
        stats.license_files[cand.license] += 1
        stats.license_bytes[cand.license] += size
        info.files[cand.language] += 1
        info.bytes[cand.language] += size

    def commit(self) -> dict[str, dict[str, list[str]]]:
        shards: dict[str, dict[str, list[str]]] = defaultdict(dict)
        for (split, lang), writer in sorted(self.writers.items()):
            shards[lang][split] = writer.commit()
        # A language that produced nothing in a split must not keep stale shards there.
        for lang in self.cfg.langs:
            for split in ("train", "valid"):
                if (split, lang) not in self.writers:
                    for old in (self.cfg.out / split).glob(f"{lang}-*.jsonl"):
                        old.unlink()
        return shards


def iter_sources(cfg: BuildConfig) -> Iterator[tuple[SourceInfo, Iterator[Candidate]]]:
    """Sources in order of value: the first copy of a duplicated file is the one kept."""
    yield stdlib_files(cfg.stdlib, cfg.langs)
    for name in cfg.pypi:
        yield wheel_files(name, cfg.cache / "pypi", cfg.offline, cfg.langs)
    for name in cfg.npm:
        yield npm_files(name, cfg.cache / "npm", cfg.offline, cfg.langs)
    for spec in cfg.debian:
        fetch = debian_source_files if spec.source else debian_files
        yield fetch(spec, cfg.cache / "debian", cfg.offline, cfg.langs)


def build(cfg: BuildConfig) -> dict[str, object]:
    if not cfg.benchmarks.is_dir():
        raise SystemExit(f"benchmarks folder {cfg.benchmarks} not found: refusing to build undecontaminated")
    started = time.time()
    index = BenchmarkIndex.from_folder(cfg.benchmarks)
    log.info(
        "benchmark index: %d programs, %d windows, %d long lines",
        index.programs,
        len(index.windows),
        len(index.long_lines),
    )
    cfg.out.mkdir(parents=True, exist_ok=True)
    pipe = Pipeline(cfg, index)
    infos: list[SourceInfo] = []
    for info, candidates in iter_sources(cfg):
        infos.append(info)
        for cand in candidates:
            if cand.language in cfg.langs:
                pipe.take(info, cand)
        if info.skipped:
            log.info("%-28s skipped: %s", f"{info.kind}:{info.name}", info.skipped)
        else:
            kept = ", ".join(f"{lang} {n}" for lang, n in sorted(info.files.items())) or "nothing kept"
            log.info("%-28s %-22s %s", f"{info.kind}:{info.name}", info.license, kept)
    shards = pipe.commit()
    manifest = merge_manifest(cfg, pipe.stats, shards, infos, time.time() - started)
    (cfg.out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (cfg.out / "LICENSES.md").write_text(render_licenses(manifest))
    return manifest


def configured_source_ids(cfg: BuildConfig) -> set[str]:
    ids = {f"stdlib:cpython-{'.'.join(map(str, sys.version_info[:3]))}"}
    ids |= {f"pypi:{name}" for name in cfg.pypi} | {f"npm:{name}" for name in cfg.npm}
    ids |= {f"{'debian-src' if spec.source else 'debian'}:{spec.package}" for spec in cfg.debian}
    return ids


def merge_manifest(
    cfg: BuildConfig,
    stats: dict[str, LangStats],
    shards: dict[str, dict[str, list[str]]],
    infos: list[SourceInfo],
    seconds: float,
) -> dict[str, object]:
    """Replace the rebuilt languages in MANIFEST.json and keep the others as they were."""
    path = cfg.out / "MANIFEST.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    languages: dict[str, object] = {k: v for k, v in old.get("languages", {}).items() if k not in cfg.langs}
    for lang in sorted(cfg.langs):
        st = stats.get(lang, LangStats())
        languages[lang] = {
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "files": dict(st.files),
            "bytes": dict(st.bytes),
            "shards": shards.get(lang, {}),
            "dropped": dict(sorted(st.dropped.items())),
            "contaminated_by_benchmark": dict(st.contaminated),
            "licenses": {
                lic: {"files": st.license_files[lic], "bytes": st.license_bytes[lic]}
                for lic in sorted(st.license_files)
            },
        }
    # Entries of sources no longer configured (renamed or removed from the lists) are dropped.
    configured = configured_source_ids(cfg)
    sources: dict[str, dict[str, object]] = {
        s["id"]: s for s in old.get("sources", []) if s["id"] in configured
    }
    for entry in sources.values():
        entry["files"] = {k: v for k, v in entry.get("files", {}).items() if k not in cfg.langs}
        entry["bytes"] = {k: v for k, v in entry.get("bytes", {}).items() if k not in cfg.langs}
    for info in infos:
        if info.skipped == "language not requested":
            continue
        sid = f"{info.kind}:{info.name}"
        entry = sources.setdefault(sid, {"id": sid, "files": {}, "bytes": {}})
        entry.update(
            name=info.name,
            kind=info.kind,
            version=info.version,
            license=info.license,
            license_evidence=info.license_evidence,
            skipped=info.skipped,
        )
        entry["files"].update(info.files)
        entry["bytes"].update(info.bytes)
    return {
        "format": "jsonl records {path, language, source, license, text}; split by file",
        "valid_fraction": cfg.valid_fraction,
        "last_build": {
            "langs": sorted(cfg.langs),
            "seconds": round(seconds, 1),
            "benchmarks": str(cfg.benchmarks),
        },
        "languages": dict(sorted(languages.items())),
        "sources": sorted(sources.values(), key=lambda s: str(s["id"])),
    }


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f}"


def render_licenses(manifest: dict[str, object]) -> str:
    """Human-readable summary: what the corpus holds under which license, and what was refused."""
    languages: dict[str, dict[str, object]] = manifest["languages"]  # type: ignore[assignment]
    sources: list[dict[str, object]] = manifest["sources"]  # type: ignore[assignment]
    out = [
        "# Corpus licenses",
        "",
        "Generated by `python -m engine.corpus build`. Only permissive licenses are accepted (MIT, BSD,",
        "Apache-2.0, ISC, PSF, Unlicense, Zlib, 0BSD, CC0 / public domain); copyleft, MPL and unknown",
        "licenses are refused. Every record carries its license; see MANIFEST.json for the evidence.",
        "",
        "## Per language",
        "",
        "| language | files | MB | licenses (files) |",
        "| --- | ---: | ---: | --- |",
    ]
    totals: Counter[str] = Counter()
    for lang, entry in languages.items():
        files = sum(entry["files"].values())  # type: ignore[union-attr]
        size = sum(entry["bytes"].values())  # type: ignore[union-attr]
        lic = entry["licenses"]  # type: ignore[index]
        for name, v in lic.items():  # type: ignore[union-attr]
            totals[name] += v["bytes"]
        summary = ", ".join(f"{k} ({v['files']})" for k, v in lic.items())  # type: ignore[union-attr]
        out.append(f"| {lang} | {files} | {_mb(size)} | {summary} |")
    out += ["", "## Per license", "", "| license | MB |", "| --- | ---: |"]
    out += [f"| {name} | {_mb(size)} |" for name, size in totals.most_common()]
    out += [
        "",
        "## Sources used",
        "",
        "| source | version | license | files | MB |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for s in sources:
        files = sum(s["files"].values())  # type: ignore[union-attr]
        if not s["skipped"] and files:
            size = sum(s["bytes"].values())  # type: ignore[union-attr]
            out.append(f"| {s['id']} | {s['version']} | {s['license']} | {files} | {_mb(size)} |")
    out += ["", "## Sources refused or unavailable", "", "| source | why |", "| --- | --- |"]
    out += [f"| {s['id']} | {s['skipped']} |" for s in sources if s["skipped"]]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _parse_langs(value: str) -> set[str]:
    langs = {v.strip() for v in value.split(",") if v.strip()}
    unknown = langs - set(ALL_LANGS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown languages: {', '.join(sorted(unknown))}")
    return langs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.corpus", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="gather, filter, dedup, decontaminate and write the corpus")
    b.add_argument("--out", type=Path, default=Path("data/corpus"))
    b.add_argument("--cache", type=Path, default=Path("data/cache"), help="downloaded packages")
    b.add_argument("--langs", type=_parse_langs, default=set(ALL_LANGS), help="comma-separated")
    b.add_argument("--max-mb", type=float, default=None, help="stop adding a language's files past N MB")
    b.add_argument("--valid-fraction", type=float, default=0.01)
    b.add_argument("--benchmarks", type=Path, default=DEFAULT_BENCHMARKS, help="held-out benchmarks")
    b.add_argument("--offline", action="store_true", help="use the cache only, download nothing")
    b.add_argument("-v", "--verbose", action="store_true", help="log every dropped file and why")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s"
    )
    cfg = BuildConfig(
        out=args.out,
        cache=args.cache,
        langs=args.langs,
        benchmarks=args.benchmarks,
        max_bytes=int(args.max_mb * 1e6) if args.max_mb else None,
        valid_fraction=args.valid_fraction,
        offline=args.offline,
    )
    manifest = build(cfg)
    for lang, entry in manifest["languages"].items():  # type: ignore[union-attr]
        if lang in cfg.langs:
            files, size = sum(entry["files"].values()), sum(entry["bytes"].values())
            log.info("%-11s %7d files %8s MB  dropped %s", lang, files, _mb(size), entry["dropped"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
