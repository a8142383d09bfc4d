"""License judgement: SPDX-like expressions, free-text fields, wheel METADATA and package.json."""

from __future__ import annotations

import email.parser
import re
from dataclasses import dataclass

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
