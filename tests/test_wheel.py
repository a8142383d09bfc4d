"""The runtime wheel as a user installs it: built from the checkout, installed in a fresh virtual
environment, it holds the server and the engine only and completes code in a folder outside the checkout."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "stats.py"


def run(*command: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", out, ROOT)
    assert built.returncode == 0, built.stderr[-3000:]
    (found,) = out.glob("dgemma_lsp-*.whl")
    return found


def test_the_wheel_holds_the_server_and_the_engine_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == {"dgemma_lsp", "engine"}
    assert "engine/default/tokenizer.json" in names  # the bundled model travels with it


def test_the_installed_wheel_completes_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    pip = venv / "bin" / "pip"
    for requirement in ("torch==2.13.0", wheel):  # the README's order: the CPU build of torch first
        installed = run(pip, "install", "--quiet", "--disable-pip-version-check", requirement)
        assert installed.returncode == 0, installed.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(DEMO, elsewhere)
    done = run(
        venv / "bin" / "dgemma-lsp",
        "complete",
        DEMO.name,
        "--line",
        "10",
        "--col",
        "12",
        "--json",
        cwd=elsewhere,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    assert answer["model"] == "default" and answer["device"] == "cpu" and answer["prompt_tokens"] > 0
    assert answer["text"] == answer["candidates"][0]  # what it offers, from the bundled model
    # The developer tools stay in the checkout: not importable, and `eval` says where to find them.
    python = venv / "bin" / "python"
    assert run(python, "-c", "import training", cwd=elsewhere).returncode != 0
    assert run(python, "-c", "import evaluation", cwd=elsewhere).returncode != 0
    refused = run(venv / "bin" / "dgemma-lsp", "eval", "heldout", cwd=elsewhere)
    assert (
        refused.returncode == 2 and "needs a checkout" in refused.stderr and "Traceback" not in refused.stderr
    )
