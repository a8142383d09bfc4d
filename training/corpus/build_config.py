"""What a corpus build reads and writes: folders, languages, sources, size cap, split."""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from training.corpus.sources.debian import DEBIAN_SPECS, DebianSpec
from training.corpus.sources.npm import NPM_PACKAGES
from training.corpus.sources.pypi import PYPI_PACKAGES

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BENCHMARKS = REPO_ROOT.parent / "shared" / "benchmarks"
DEFAULT_HELDOUT = REPO_ROOT / "evaluation" / "heldout"  # the project's own FIM set, when it exists


@dataclass
class BuildConfig:
    out: Path
    cache: Path
    langs: set[str]
    benchmarks: Path
    heldout: Path = DEFAULT_HELDOUT  # every *.jsonl below it is decontaminated against too
    max_bytes: int | None = None  # per language
    valid_fraction: float = 0.01
    offline: bool = False
    pypi: tuple[str, ...] = PYPI_PACKAGES
    npm: tuple[str, ...] = NPM_PACKAGES
    debian: tuple[DebianSpec, ...] = DEBIAN_SPECS
    stdlib: Path = field(default_factory=lambda: Path(sysconfig.get_paths()["stdlib"]))
