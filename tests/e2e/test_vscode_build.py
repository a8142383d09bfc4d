"""The VS Code extension's own checks, so that CI's pytest run covers them: strict type check
(tsc --noEmit), lint (biome) and the unit tests of its vscode-free modules (node --test)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.e2e import tools

pytestmark = pytest.mark.editors

EXTENSION = tools.ROOT / "editors" / "vscode"


def test_typecheck_lint_and_unit_tests():
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    if not (EXTENSION / "node_modules").is_dir():
        pytest.skip(f"editors/vscode/node_modules is missing: run `{tools.INSTALL}` (npm ci)")
    done = subprocess.run(
        ["npm", "run", "--silent", "check"], cwd=EXTENSION, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "# fail 0" in done.stdout
