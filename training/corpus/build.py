"""The build: every source's files through filters, dedup and decontamination into the shards."""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from training.corpus.build_config import BuildConfig
from training.corpus.decontaminate import BenchmarkIndex
from training.corpus.dedup import MinHashDeduper, exact_key
from training.corpus.filters import MAX_FILE_BYTES, decode_source, reject_reason
from training.corpus.manifest import LangStats, merge_manifest, render_licenses
from training.corpus.shards import ShardWriter, split_of
from training.corpus.sources.base import Candidate, SourceInfo
from training.corpus.sources.debian import debian_files
from training.corpus.sources.debian_source import debian_source_files
from training.corpus.sources.npm import npm_files
from training.corpus.sources.pypi import wheel_files
from training.corpus.sources.stdlib import stdlib_files
from training.progress import progress

log = logging.getLogger(__name__)


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
    index = BenchmarkIndex.from_folder(cfg.benchmarks, cfg.heldout)
    log.info("held-out FIM set: %s", cfg.heldout if cfg.heldout.is_dir() else "none")
    log.info(
        "benchmark index: %d programs, %d windows, %d long lines",
        index.programs,
        len(index.windows),
        len(index.long_lines),
    )
    cfg.out.mkdir(parents=True, exist_ok=True)
    pipe = Pipeline(cfg, index)
    infos: list[SourceInfo] = []
    sources = 1 + len(cfg.pypi) + len(cfg.npm) + len(cfg.debian)
    for info, candidates in progress(iter_sources(cfg), sources, "corpus sources", "source"):
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
