"""Debian machine-readable copyright files (DEP-5): the license of each file of a package."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from training.corpus.licenses import (
    LicenseVerdict,
    classify_license_text,
    is_rejected_text,
    parse_license_expression,
)


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
