"""npm packages, as the tarballs `npm pack` fetches; package.json decides the license."""

from __future__ import annotations

import json
import logging
import re
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

from training.corpus.languages import language_of
from training.corpus.licenses import license_from_package_json
from training.corpus.sources.base import Candidate, Source, SourceInfo, run_fetch, version_key

log = logging.getLogger(__name__)


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
    return max(found, key=lambda vp: version_key(vp[0]))[1]


def fetch_npm(name: str, cache: Path, offline: bool) -> Path | None:
    cache.mkdir(parents=True, exist_ok=True)
    if (hit := cached_npm(name, cache)) is not None or offline:
        return hit
    if shutil.which("npm") is None:
        log.warning("skip npm:%s: npm is not installed", name)
        return None
    if not run_fetch(["npm", "pack", "--silent", name], f"npm:{name}", cwd=cache):
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
    if not info.judged(verdict):
        return info, iter(())

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
