"""Corpus builder: license judgement, filters, dedup, decontamination, split. Offline and fast."""

from __future__ import annotations

import gzip
import json
import textwrap
from pathlib import Path

import pytest

from training.corpus.build import build
from training.corpus.build_config import BuildConfig
from training.corpus.debian_copyright import Dep5Copyright
from training.corpus.decontaminate import BenchmarkIndex
from training.corpus.dedup import MinHashDeduper, exact_key
from training.corpus.filters import looks_generated, reject_reason
from training.corpus.languages import language_of
from training.corpus.licenses import (
    license_from_package_json,
    license_from_wheel_metadata,
    parse_license_expression,
)
from training.corpus.shards import split_of

# --- licenses ---------------------------------------------------------------------------------

MIT_TEXT = """MIT License

Copyright (c) 2022 Someone

Permission is hereby granted, free of charge, to any person obtaining a copy of this software
... THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED ...
"""


def _metadata(*headers: str) -> str:
    return "Metadata-Version: 2.4\nName: pkg\nVersion: 1.0\n" + "".join(h + "\n" for h in headers)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (("License-Expression: MIT",), "MIT"),
        (("License-Expression: Apache-2.0 OR BSD-2-Clause",), "Apache-2.0"),
        (("License: BSD-3-Clause", "Classifier: License :: OSI Approved :: BSD License"), "BSD-3-Clause"),
        (("Classifier: License :: OSI Approved :: Apache Software License",), "Apache-2.0"),
        (("License: ISC license", "Classifier: License :: OSI Approved :: ISC License (ISCL)"), "ISC"),
        (("Classifier: License :: OSI Approved :: Python Software Foundation License",), "PSF-2.0"),
        # A whole MIT text pasted into License: ("IMPLIED" must not read as "MPL").
        (("License: " + MIT_TEXT.replace("\n", "\n        "),), "MIT"),
    ],
)
def test_permissive_wheel_metadata_is_accepted(headers: tuple[str, ...], expected: str) -> None:
    verdict = license_from_wheel_metadata(_metadata(*headers))
    assert verdict.license == expected


@pytest.mark.parametrize(
    "headers",
    [
        ("License-Expression: GPL-2.0-or-later",),
        ("License-Expression: LGPL-2.1-only",),
        ("License-Expression: MPL-2.0",),
        ("License: MPL-2.0 AND MIT",),
        ("Classifier: License :: OSI Approved :: GNU General Public License v3 (GPLv3)",),
        ("Classifier: License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)",),
        # Disagreeing signals: refuse rather than guess.
        ("License: MIT", "Classifier: License :: OSI Approved :: GNU General Public License (GPL)"),
        ("License: UNKNOWN",),
        ("Classifier: License :: OSI Approved",),
        (),
    ],
)
def test_copyleft_mpl_and_unknown_wheel_metadata_is_rejected(headers: tuple[str, ...]) -> None:
    verdict = license_from_wheel_metadata(_metadata(*headers))
    assert verdict.license is None
    assert not verdict.accepted


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("MIT", "MIT"),
        ("MIT OR GPL-3.0-only", "MIT"),
        ("(MIT OR Apache-2.0) AND BSD-3-Clause", "MIT AND BSD-3-Clause"),
        ("Apache-2.0 WITH LLVM-exception", "Apache-2.0"),
        ("Apache-2.0 with LLVM exception or MIT", "Apache-2.0"),  # Debian's spelling
        ("MIT AND GPL-2.0-only", None),
        ("GPL-2.0 WITH Classpath-exception-2.0", None),
        ("BlueOak-1.0.0", None),  # permissive, but not on our list
        ("UNLICENSED", None),  # npm's word for proprietary, not the Unlicense
        ("MIT AND (", None),
    ],
)
def test_license_expressions(expr: str, expected: str | None) -> None:
    assert parse_license_expression(expr) == expected


def test_npm_package_json_license_fields() -> None:
    assert license_from_package_json({"license": "ISC"}).license == "ISC"
    assert license_from_package_json({"license": {"type": "MIT"}}).license == "MIT"
    legacy = {"licenses": [{"type": "GPL-2.0"}, {"type": "MIT"}]}
    assert license_from_package_json(legacy).license == "MIT"
    assert license_from_package_json({"license": "MPL-2.0"}).license is None
    assert license_from_package_json({}).license is None


DEP5 = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: thing

Files: *
Copyright: 2020 Upstream
License: Expat

Files: src/gpl/*
Copyright: 2020 Someone Else
License: GPL-2+

Files: src/extra/*
Copyright: 2021 Third
License:
 Permission is hereby granted, free of charge, to any person obtaining a copy

Files: debian/*
License: GPL-2+
"""


def test_debian_copyright_is_judged_per_file() -> None:
    dep5 = Dep5Copyright.parse(DEP5)
    assert dep5 is not None
    assert dep5.license_for("src/main.c").license == "MIT"
    assert dep5.license_for("src/gpl/hash.c").license is None
    # Installed below the upstream tree: the pattern still matches as a suffix.
    assert dep5.license_for("usr/share/thing/src/gpl/hash.c").license is None
    assert dep5.license_for("src/extra/x.c").license == "MIT"  # stanza with a text, no short name


def test_debian_copyright_not_machine_readable_is_unknown() -> None:
    assert Dep5Copyright.parse("This package was debianized by someone.\nIt is GPL or MIT.\n") is None


# --- filters ----------------------------------------------------------------------------------

PY_SOURCE = textwrap.dedent(
    '''\
    import os


    def list_python_files(root: str) -> list[str]:
        """Every .py file below root, sorted."""
        found = []
        for folder, _dirs, files in os.walk(root):
            found.extend(os.path.join(folder, name) for name in files if name.endswith(".py"))
        return sorted(found)
    '''
)


def test_clean_source_is_kept() -> None:
    assert reject_reason("pkg/files.py", "python", PY_SOURCE) is None


def test_minified_files_are_detected() -> None:
    js = "function add(a, b) {\n  return a + b;\n}\n\nfunction sub(a, b) {\n  return a - b;\n}\n"
    js += "module.exports = { add, sub };\n"
    assert reject_reason("lib/app.js", "javascript", js) is None
    assert reject_reason("lib/app.min.js", "javascript", js) == "minified"
    one_line = "!function(e){" + "var a=1;" * 100 + "}();\nx();\ny();\n"
    assert reject_reason("lib/app.js", "javascript", one_line) == "minified"
    assert reject_reason("pkg/table.py", "python", PY_SOURCE + "X = '" + "a" * 600 + "'\n") == "long_lines"


def test_generated_compiled_vendored_and_data_files_are_dropped() -> None:
    header = "# Code generated by protoc-gen-go. DO NOT EDIT.\n"
    assert reject_reason("pkg/api.py", "python", header + PY_SOURCE) == "generated"
    compiled = '"use strict";\nObject.defineProperty(exports, "__esModule", { value: true });\n' + (
        "exports.add = (a, b) => a + b;\n"
    )
    assert reject_reason("lib/add.js", "javascript", compiled) == "compiled"
    assert reject_reason("pkg/_vendor/six.py", "python", PY_SOURCE) == "vendored"
    assert reject_reason("pkg/testdata/broken.py", "python", PY_SOURCE) == "test_data"
    rows = "".join(f"    {i * 7919 % 100003}, {i * 31337 % 99991},\n" for i in range(60))
    numbers = "TABLE = [\n" + rows + "]\n"
    assert reject_reason("pkg/table.py", "python", numbers) == "data_like"
    assert reject_reason("pkg/__init__.py", "python", "from .a import b\n") == "too_small"


def test_prose_about_generation_is_not_a_generated_marker() -> None:
    prose = '"""AST nodes generated by the parser."""\n' + PY_SOURCE
    assert not looks_generated(prose)
    assert looks_generated('"""This file is automatically generated; do not muck it up."""\n' + PY_SOURCE)


def test_language_by_extension_and_shebang() -> None:
    assert language_of("a/b.d.ts") == "typescript"
    assert language_of("x/y.h") == "c"
    assert language_of("x/y.h", cpp_headers=True) == "cpp"
    assert language_of("usr/bin/tool", head=b"#!/usr/bin/env bash\nset -e\n") == "bash"
    assert language_of("usr/bin/tool", head=b"\x7fELF") is None


# --- dedup ------------------------------------------------------------------------------------


def test_exact_dedup_ignores_whitespace_only_changes() -> None:
    reformatted = PY_SOURCE.replace("    ", "  ").replace("\n\n", "\n\n\n") + "   \n"
    assert exact_key(reformatted) == exact_key(PY_SOURCE)
    assert exact_key(PY_SOURCE.replace("sorted(found)", "found")) != exact_key(PY_SOURCE)


def _module(n: int, tweak: str = "") -> str:
    body = "".join(f"def helper_{i}(x):\n    return x * {i} + {n}\n\n" for i in range(40))
    return f'"""Module {n}."""\n{tweak}\n' + body


def test_near_duplicates_are_caught_and_distinct_files_kept() -> None:
    dedup = MinHashDeduper()
    assert dedup.add_if_new(_module(1))
    # A copy with a changed header and one edited function is a near duplicate.
    edited = _module(1, tweak="import os").replace("return x * 7 + 1", "return x * 7 + 2")
    assert not dedup.add_if_new(edited)
    # Same shape, different constants in every function: a different file.
    assert dedup.add_if_new(_module(2))
    assert dedup.add_if_new(PY_SOURCE)


# --- decontamination --------------------------------------------------------------------------

PROMPT = textwrap.dedent(
    '''\
    from typing import List


    def below_zero_twice(operations: List[int]) -> bool:
        """ You're given a list of deposit and withdrawal operations on a bank account that starts with
        zero balance. Your task is to detect if at any point the balance of account falls below zero twice.
        >>> below_zero_twice([1, 2, -4, 5, -9, 3])
        True
        """
    '''
)
SOLUTION = "    balance = 0\n    dips = 0\n    for op in operations:\n        balance += op\n"
SUFFIX = "        if balance < 0:\n            dips += 1\n    return dips >= 2\n"
TEST = "\n\ndef check(candidate):\n    assert candidate([1, 2, -4, 5, -9, 3]) is True\n"


def _fake_benchmarks(root: Path) -> Path:
    folder = root / "benchmarks" / "human-eval-infilling"
    folder.mkdir(parents=True)
    row = {"task_id": "X/0", "prompt": PROMPT, "canonical_solution": SOLUTION, "suffix": SUFFIX, "test": TEST}
    with gzip.open(folder / "HumanEval-Fake.jsonl.gz", "wt") as fh:
        fh.write(json.dumps(row) + "\n")
    return root / "benchmarks"


def test_decontamination_against_a_tiny_benchmark(tmp_path: Path) -> None:
    index = BenchmarkIndex.from_folder(_fake_benchmarks(tmp_path))
    assert index.programs == 1
    # The whole program, re-indented inside a bigger file.
    copied = "import sys\n\n\nclass Holder:\n" + textwrap.indent(PROMPT + SOLUTION + SUFFIX, "    ")
    assert index.hit(copied + "\nprint(sys.argv)\n") == "human-eval-infilling"
    # Only the prompt (signature and docstring): caught by its long lines.
    assert index.hit("import os\n" + PROMPT + "    pass\n") == "human-eval-infilling"
    assert index.hit(PY_SOURCE) is None


def _heldout_set(root: Path, program: str) -> Path:
    folder = root / "heldout"
    (folder / "python").mkdir(parents=True)
    record = {"prefix": program[:300], "middle": program[300:350], "suffix": program[350:], "id": "h/0"}
    (folder / "python" / "fim.jsonl").write_text(json.dumps(record) + "\n")
    return folder


def test_decontamination_against_the_project_heldout_set(tmp_path: Path) -> None:
    benchmarks = _fake_benchmarks(tmp_path)
    index = BenchmarkIndex.from_folder(benchmarks, _heldout_set(tmp_path, _module(7)))
    assert index.programs == 2
    copied = "import sys\n\n\nclass Holder:\n" + textwrap.indent(_module(7), "    ")
    assert index.hit(copied) == "heldout"
    assert index.hit(_module(8)) is None
    assert BenchmarkIndex.from_folder(benchmarks, tmp_path / "no-such-folder").programs == 1


def test_boilerplate_shared_by_many_benchmark_programs_is_not_evidence() -> None:
    header = "".join(f"# Licensed line number {i} of a long shared header text here\n" for i in range(10))
    programs = [header + f"def task_{n}(x):\n    return x + {n}\n" for n in range(6)]
    index = BenchmarkIndex.from_texts({"human-eval-infilling": programs})
    assert index.hit(header + PY_SOURCE) is None
    # The program itself is still found through the windows that reach into its own lines.
    assert index.hit(programs[0]) == "human-eval-infilling"


# --- split and the whole build ----------------------------------------------------------------


def test_split_is_by_file_and_deterministic() -> None:
    paths = [f"pkg-1.0/mod_{i}.py" for i in range(2000)]
    splits = [split_of(p, 0.1) for p in paths]
    assert splits == [split_of(p, 0.1) for p in paths]
    assert 120 <= splits.count("valid") <= 280
    assert split_of("pkg-1.0/mod_0.py", 0.0) == "train"


def test_build_writes_split_shards_manifest_and_drops_with_reasons(tmp_path: Path) -> None:
    stdlib = tmp_path / "stdlib"
    (stdlib / "test").mkdir(parents=True)
    files = {f"mod_{i}.py": _module(100 + i) for i in range(12)}
    files["copy_of_mod_0.py"] = _module(100)  # exact duplicate
    files["leak.py"] = "import sys\n" + PROMPT + SOLUTION + SUFFIX  # benchmark program
    files["tiny.py"] = "x = 1\n"
    for name, text in files.items():
        (stdlib / name).write_text(text)
    (stdlib / "test" / "test_mod.py").write_text(_module(999))  # test suites are never read
    cfg = BuildConfig(
        out=tmp_path / "corpus",
        cache=tmp_path / "cache",
        langs={"python"},
        benchmarks=_fake_benchmarks(tmp_path),
        heldout=_heldout_set(tmp_path, _module(111)),
        valid_fraction=0.5,
        offline=True,
        pypi=(),
        npm=(),
        debian=(),
        stdlib=stdlib,
    )
    manifest = build(cfg)

    records = []
    for split in ("train", "valid"):
        for shard in sorted((cfg.out / split).glob("python-*.jsonl")):
            records += [(split, json.loads(line)) for line in shard.read_text().splitlines()]
    paths = [r["path"] for _, r in records]
    assert len(paths) == len(set(paths)) == 11  # each file once, in exactly one split
    assert {split for split, _ in records} == {"train", "valid"}
    assert all(set(r) == {"path", "language", "source", "license", "text"} for _, r in records)
    assert all(r["license"] == "PSF-2.0" and r["language"] == "python" for _, r in records)
    assert not any(p.endswith(("leak.py", "tiny.py", "test_mod.py", "mod_11.py")) for p in paths)

    python = manifest["languages"]["python"]  # type: ignore[index]
    assert python["dropped"] == {"contaminated": 2, "exact_dup": 1, "too_small": 1}
    assert sum(python["files"].values()) == 11
    assert python["contaminated_by_benchmark"] == {"human-eval-infilling": 1, "heldout": 1}
    assert (cfg.out / "LICENSES.md").read_text().count("PSF-2.0") >= 2

    # A later pass for another language keeps the Python shards and manifest entry, and forgets
    # sources that are no longer configured.
    manifest_path = cfg.out / "MANIFEST.json"
    stale = json.loads(manifest_path.read_text())
    stale["sources"].append({"id": "npm:renamed-away", "files": {"javascript": 3}, "bytes": {}})
    manifest_path.write_text(json.dumps(stale))
    cfg.langs = {"go"}
    manifest = build(cfg)
    assert sum(manifest["languages"]["python"]["files"].values()) == 11  # type: ignore[index]
    assert list((cfg.out / "train").glob("python-*.jsonl"))
    source_ids = [s["id"] for s in manifest["sources"]]  # type: ignore[union-attr]
    assert source_ids == [records[0][1]["source"]]  # the stdlib entry alone
