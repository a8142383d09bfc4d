"""What a user sees in a terminal: Neovim in tmux with the plugin, ghost text drawn on the screen.

The screen is read back with `tmux capture-pane` (the ghost text must be on it, after what was typed,
in a colour other than the code's) and saved as test-artifacts/nvim-<case>-ghost-text.png for the
READMEs. Without 'termguicolors' (the default inside tmux) the colour is the terminal's own: in
256-colour and 16-colour terminals alike the ghost must not look like code.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest

from tests.e2e import tools
from tests.e2e.conftest import need
from tests.e2e.terminal_png import colours, screenshot
from tests.e2e.test_nvim import FIXTURE, INIT, LINE, PLUGIN, TYPED, lua

COLUMNS, ROWS = 90, 14


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True, timeout=30).stdout


# case: (Neovim, TERM, termguicolors)
SCREENS = {
    "0.12": ("0.12", "xterm-256color", True),
    "0.11": ("0.11", "xterm-256color", True),
    "0.12-256-colours": ("0.12", "xterm-256color", False),
    "0.12-16-colours": ("0.12", "xterm-16color", False),
}
ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("case", list(SCREENS))
def test_ghost_text_on_the_terminal_screen(
    case, tmp_path, workspace, server_command, tiny_model_dir, artifacts
):  # fmt: skip
    version, term, truecolor = SCREENS[case]
    binary = need(tools.find_nvim, version)
    if shutil.which("tmux") is None:
        pytest.skip(f"tmux is not installed: run `{tools.INSTALL}`")
    chromium = need(tools.find_chromium)
    log = tmp_path / "dgemma.log"
    init = tmp_path / "init.lua"
    init.write_text(
        INIT.format(
            plugin=lua(PLUGIN), server=lua(server_command), model=lua(tiny_model_dir), extra="", log=lua(log)
        )
        + "vim.o.statusline = \"%f %m%=%{v:lua.require'dgemma'.statusline()} \"\nvim.o.laststatus = 2\n"
        + f"vim.o.termguicolors = {'true' if truecolor else 'false'}\nvim.cmd.colorscheme('default')\n"
    )
    colorterm = ["-e", "COLORTERM=truecolor"] if truecolor else []
    session = f"dgemma-e2e-{case.replace('.', '')}-{tmp_path.name}"
    command = f"{binary} --clean -n -u {init} {workspace / FIXTURE}"
    tmux("-f", "/dev/null", "new-session", "-d", "-s", session, "-x", str(COLUMNS), "-y", str(ROWS),
         "-e", f"TERM={term}", *colorterm, command)  # fmt: skip
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
        screenshot(ansi, artifacts / f"nvim-{case}-ghost-text.png", chromium, 830, 300)
        assert typed_row is not None, "the typed text is not on the screen"
        assert len(typed_row.rstrip()) > len("    " + TYPED) + 1, (
            f"no ghost text after the typed text: {typed_row!r}"
        )
        # The ghost is drawn in a colour the code it follows is not drawn in.
        row = next(line for line in ansi.split("\n") if ESCAPES.sub("", line).startswith("    " + TYPED))
        cells = colours(row)
        code = {colour for char, colour in cells[4 : len("    " + TYPED)] if char.strip()}
        ghost = {colour for char, colour in cells[len("    " + TYPED) :] if char.strip()}
        assert ghost and not ghost & code, f"the ghost is drawn like code: ghost {ghost}, code {code}"
        # Ghost text is only drawn: the file on disk and the buffer are unchanged until accepted.
        assert (workspace / FIXTURE).read_text().split("\n")[LINE - 1] == "    "
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=30)
