"""What every source yields (candidate files and its manifest entry), and fetching with a tool."""

from __future__ import annotations

import logging
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from training.corpus.licenses import LicenseVerdict

log = logging.getLogger(__name__)


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

    def judged(self, verdict: LicenseVerdict) -> bool:
        """Record a package's license verdict; True when its files may be used."""
        self.license_evidence = verdict.reason
        if not verdict.accepted:
            self.skipped = f"license: {verdict.reason}"
            return False
        self.license = verdict.license or ""
        return True


Source = tuple[SourceInfo, Iterator[Candidate]]  # what the manifest says, and the files


def version_key(version: str) -> tuple[object, ...]:
    try:
        from packaging.version import Version

        return (1, Version(version))
    except Exception:  # not PEP 440: sort such versions first
        return (0, version)


def run_fetch(cmd: list[str], what: str, cwd: Path | None = None) -> bool:
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
