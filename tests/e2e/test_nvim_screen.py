"""What a user sees in a terminal: Neovim in tmux with the plugin, ghost text drawn on the screen.

The screen is read back with `tmux capture-pane` (the ghost text must be on it, after what was typed)
and saved as test-artifacts/nvim-<version>-ghost-text.png for the READMEs.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from tests.e2e import tools
from tests.e2e.conftest import need
from tests.e2e.terminal_png import screenshot
from tests.e2e.test_nvim import FIXTURE, INIT, LINE, PLUGIN, TYPED, lua

COLUMNS, ROWS = 90, 14


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True, timeout=30).stdout


@pytest.mark.parametrize("version", ["0.12", "0.11"])
def test_ghost_text_on_the_terminal_screen(
    version, tmp_path, workspace, server_command, tiny_model_dir, artifacts
):
    binary = need(tools.find_nvim, version)
    if shutil.which("tmux") is None:
        pytest.skip(f"tmux is not installed: run `{tools.INSTALL}`")
    chromium = need(tools.find_chromium)
    log = tmp_path / "dgemma.log"
    init = tmp_path / "init.lua"
    init.write_text(
        INIT.format(
            plugin=lua(PLUGIN),
            server=lua(server_command),
            model=lua(tiny_model_dir),
            backend=lua("auto"),
            log=lua(log),
        )
        + "vim.o.statusline = \"%f %m%=%{v:lua.require'dgemma'.statusline()} \"\nvim.o.laststatus = 2\n"
        + "vim.o.termguicolors = true\nvim.cmd.colorscheme('default')\n"
    )
    session = f"dgemma-e2e-{version.replace('.', '')}-{tmp_path.name}"
    command = f"{binary} --clean -n -u {init} {workspace / FIXTURE}"
    tmux("-f", "/dev/null", "new-session", "-d", "-s", session, "-x", str(COLUMNS), "-y", str(ROWS),
         "-e", "TERM=xterm-256color", "-e", "COLORTERM=truecolor", command)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while "ready" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "the model never loaded"
            time.sleep(0.2)
        tmux("send-keys", "-t", session, f"{LINE}GA", TYPED)
        typed_row = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", session).split("\n")
            typed_row = next((row for row in screen if row.startswith("    " + TYPED)), None)
            if typed_row is not None and len(typed_row.rstrip()) > len("    " + TYPED) + 1:
                break
            time.sleep(0.2)
        time.sleep(0.5)  # the statusline's latency comes with the same answer
        ansi = tmux("capture-pane", "-e", "-p", "-t", session)
        screenshot(ansi, artifacts / f"nvim-{version}-ghost-text.png", chromium, 830, 300)
        assert typed_row is not None, "the typed text is not on the screen"
        assert len(typed_row.rstrip()) > len("    " + TYPED) + 1, (
            f"no ghost text after the typed text: {typed_row!r}"
        )
        # Ghost text is only drawn: the file on disk and the buffer are unchanged until accepted.
        assert (workspace / FIXTURE).read_text().split("\n")[LINE - 1] == "    "
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=30)
