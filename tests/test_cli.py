"""The terminal commands as a user runs them: `dgemma-lsp complete` and `dgemma-lsp doctor`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.inline.repair import ParseCheck

DEMO = Path(__file__).parent.parent / "fixtures" / "demo" / "stats.py"
CLI = [sys.executable, "-m", "dgemma_lsp"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


def test_complete_prints_the_json_an_editor_would_be_shown(tiny_model_dir):
    done = run("complete", str(DEMO), "--line", "10", "--col", "12", "--json", "--model", str(tiny_model_dir))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert {"text", "steps", "tokens_per_forward", "latency_ms"} <= answer.keys()
    assert answer["steps"] >= 1 and answer["latency_ms"] > 0 and answer["mode"] == "single_line"
    # The same pipeline as the server: what is printed never breaks the file's parse.
    source = DEMO.read_text()
    cursor = sum(len(line) + 1 for line in source.split("\n")[:9]) + 11
    check = ParseCheck(LanguageRegistry().grammar("python"), source[:cursor], source[cursor:])
    assert not check.introduced(answer["text"])


def test_complete_refuses_bad_positions_and_missing_files_with_a_message(tiny_model_dir):
    bad_line = run("complete", str(DEMO), "--line", "0", "--col", "1", "--model", str(tiny_model_dir))
    assert bad_line.returncode == 2 and "1-based" in bad_line.stderr
    missing = run("complete", "no/such/file.py", "--line", "1", "--col", "1")
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    # Past the end of the file or of the line is an error too, not a completion somewhere else.
    lines = DEMO.read_text().split("\n")
    past_file = run("complete", str(DEMO), "--line", "99", "--col", "1", "--model", str(tiny_model_dir))
    assert past_file.returncode == 2 and f"({len(lines) - 1} lines)" in past_file.stderr, past_file.stderr
    past_line = run("complete", str(DEMO), "--line", "10", "--col", "99", "--model", str(tiny_model_dir))
    assert past_line.returncode == 2 and f"--col 1 to {len(lines[9]) + 1}" in past_line.stderr
    assert past_file.stdout == past_line.stdout == ""


def test_complete_help_describes_every_option():
    from dgemma_lsp.cli import _complete_parser

    undescribed = [a.dest for a in _complete_parser()._actions if not a.help]
    assert undescribed == [], f"complete --help says nothing of {undescribed}"


def test_doctor_reports_versions_device_model_and_grammars():
    done = run("doctor")
    assert done.returncode == 0, done.stderr
    for word in ("torch", "transformers", "pygls", "tree-sitter", "cpu", "engine/default", "python"):
        assert word in done.stdout, f"{word!r} missing from doctor's report:\n{done.stdout}"
