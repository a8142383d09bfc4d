"""What a user sees in a terminal: Neovim in tmux with the plugin, ghost text drawn on the screen.

The screen is read back with `tmux capture-pane` (the ghost text must be on it, after what was typed,
in a colour other than the code's) and saved as test-artifacts/nvim-<case>-ghost-text.png for the
READMEs. Without 'termguicolors' (the default inside tmux) the colour is the terminal's own: in
256-colour and 16-colour terminals alike the ghost must not look like code. The other tests here look
at what a first hour by hand met on this screen: ghost text after a typed closing bracket, a
multi-line suggestion at the bottom of the window, the statusline while the workspace is indexed and
in a :checkhealth window.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import tools
from tests.e2e.conftest import add_modules, need, poll
from tests.e2e.terminal_png import colours, screenshot, styled
from tests.e2e.test_nvim import FIXTURE, INIT, LINE, PLUGIN, TYPED, answer, lua

pytestmark = pytest.mark.editors

COLUMNS, ROWS = 90, 14
STATUSLINE = "vim.o.statusline = \"%f %m%=%{v:lua.require'dgemma'.statusline()} \"\nvim.o.laststatus = 2\n"


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True, timeout=30).stdout


class Screen:
    """Neovim in a tmux session: keys in, the screen (and its colours) out."""

    def __init__(self, session: str, log: Path, height: int) -> None:
        self.session = session
        self.log = log
        self.height = height

    def keys(self, *keys: str) -> None:
        tmux("send-keys", "-t", self.session, *keys)

    def type(self, text: str) -> None:
        tmux("send-keys", "-t", self.session, "-l", text)

    def rows(self) -> list[str]:
        return tmux("capture-pane", "-p", "-t", self.session).split("\n")[: self.height]

    def ansi_rows(self) -> list[str]:
        return tmux("capture-pane", "-e", "-p", "-t", self.session).split("\n")[: self.height]

    def statusline(self) -> str:
        return self.rows()[self.height - 2]  # above the command line

    def command_line(self) -> str:
        return self.rows()[self.height - 1]

    def wait(self, what: str, check, timeout: float = 30.0):
        def screen() -> str:
            log = self.log.read_text()[-2000:] if self.log.exists() else "(no log)"
            return "the screen:\n" + "\n".join(self.rows()) + "\nplugin log:\n" + log

        return poll(what, check, timeout, screen)


@contextlib.contextmanager
def nvim_in_tmux(
    tmp_path: Path, version: str, server: Path, model: Path | str, file: Path, rows: int = ROWS,
    term: str = "xterm-256color", truecolor: bool = True, extra: str = "", server_extra: str = "",
) -> Iterator[Screen]:  # fmt: skip
    """Neovim `version` in tmux, editing `file` with the plugin and the server, once the model is ready
    (`extra`: more setup() options, `server_extra`: more server options)."""
    binary = need(tools.find_nvim, version)
    if shutil.which("tmux") is None:
        pytest.skip(f"tmux is not installed: run `{tools.INSTALL}`")
    log = tmp_path / "dgemma.log"
    init = tmp_path / "init.lua"
    init.write_text(
        INIT.format(
            plugin=lua(PLUGIN),
            server=lua(server),
            model=lua(model),
            server_extra=server_extra,
            extra=extra,
            log=lua(log),
        )
        + STATUSLINE
        + f"vim.o.termguicolors = {'true' if truecolor else 'false'}\nvim.cmd.colorscheme('default')\n"
    )
    colorterm = ["-e", "COLORTERM=truecolor"] if truecolor else []
    session = f"dgemma-e2e-{version.replace('.', '')}-{tmp_path.name}"
    command = f"{binary} --clean -n -u {init} {file}"
    tmux("-f", "/dev/null", "new-session", "-d", "-s", session, "-x", str(COLUMNS), "-y", str(rows),
         "-c", str(file.parent), "-e", f"TERM={term}", "-e", f"XDG_STATE_HOME={tmp_path / 'state'}",
         *colorterm, command)  # fmt: skip
    screen = Screen(session, log, rows)
    try:
        screen.wait("the model to load", lambda: "ready" in (log.read_text() if log.exists() else ""), 90)
        yield screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=30)


def typed_row(screen: Screen) -> str | None:
    """The row of the typed text when ghost text follows it."""
    row = next((row for row in screen.rows() if row.startswith("    " + TYPED)), None)
    return row if row is not None and len(row.rstrip()) > len("    " + TYPED) + 1 else None


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
    chromium = need(tools.find_chromium)
    with nvim_in_tmux(
        tmp_path, version, server_command, tiny_model_dir, workspace / FIXTURE, term=term, truecolor=truecolor
    ) as screen:
        screen.keys(f"{LINE}GA", TYPED)
        screen.wait("ghost text after the typed text", lambda: typed_row(screen))
        screen.wait("the latency in the statusline", lambda: re.search(r"\dms", screen.statusline()))
        ansi = "\n".join(screen.ansi_rows())
        screenshot(ansi, artifacts / f"nvim-{case}-ghost-text.png", chromium, 830, 300)
        # The ghost is drawn in a colour the code it follows is not drawn in.
        row = next(line for line in ansi.split("\n") if ESCAPES.sub("", line).startswith("    " + TYPED))
        cells = colours(row)
        code = {colour for char, colour in cells[4 : len("    " + TYPED)] if char.strip()}
        ghost = {colour for char, colour in cells[len("    " + TYPED) :] if char.strip()}
        assert ghost and not ghost & code, f"the ghost is drawn like code: ghost {ghost}, code {code}"
        # Ghost text is only drawn: the file on disk and the buffer are unchanged until accepted.
        assert (workspace / FIXTURE).read_text().split("\n")[LINE - 1] == "    "


def cell_styles(ansi_row: str) -> list[tuple[str, dict[str, str]]]:
    """Each character of a captured row with the style it is drawn in."""
    return [(char, style) for part, style in styled(ansi_row) for char in part]


LOOK = {"color", "background"}  # MatchParen drew bold (font-weight) and underlined over it
BRACKETS = "def shorten(text, width):\n    words = text.split(width).pop()\n    \n    return words\n"


@pytest.mark.parametrize("version", ["0.12", "0.11"])
def test_ghost_text_after_a_typed_closing_bracket_keeps_its_colour(
    version, tmp_path, workspace, server_command, tiny_model_dir
):  # fmt: skip
    # The lookup draft repeats line 2 after "text.split(" whatever the tiny model writes. Typing the
    # predicted ")" makes MatchParen highlight it: the rest of the ghost must stay drawn as ghost text,
    # not bold and in the code's colour (it looked like code already in the buffer).
    file = workspace / "python" / "brackets.py"
    file.write_text(BRACKETS)
    typed = "    words = text.split("
    with nvim_in_tmux(tmp_path, version, server_command, tiny_model_dir, file) as screen:
        screen.keys("3GA")
        screen.type(typed.strip())

        def ghost_after(prefix: str) -> tuple[str, list[tuple[str, dict]]] | None:
            """What is drawn after `prefix` on line 3's row (line 2 holds the same text, as code)."""
            ansi = screen.ansi_rows()[2]
            plain = ESCAPES.sub("", ansi).rstrip()
            if plain.startswith(prefix) and plain != prefix:
                return plain[len(prefix) :], cell_styles(ansi)[len(prefix) : len(plain)]
            return None

        shown, before = screen.wait("ghost text with a closing bracket", lambda: ghost_after(typed))
        assert ")" in shown[:-1], f"the suggestion has no closing bracket with more after it: {shown!r}"
        through = shown[: shown.index(")") + 1]
        screen.type(through)
        rest, after = screen.wait("the rest of the ghost text", lambda: ghost_after(typed + through))
        assert rest == shown[len(through) :]
        ghost = before[0][1].get("color")
        drawn = [(char, style) for char, style in after if style.get("color") != ghost or set(style) - LOOK]
        assert ghost and not drawn, f"after the typed bracket the ghost is drawn as {drawn}, not in {ghost}"


# Eight lines: the last, inside second(), is where the suggestion is asked for; the bundled model
# repeats first()'s body there (a three-line block: its draft from the lines above, kept).
BOTTOM = (
    "def first(values):\n    total = sum(values)\n    count = len(values)\n    return total / count\n"
    "\n\ndef second(values):\n    \n"
)


@pytest.mark.parametrize("version", ["0.12", "0.11"])
def test_a_multi_line_suggestion_at_the_bottom_is_shown_whole_and_tab_inserts_what_was_shown(
    version, tmp_path, workspace, server_command
):  # fmt: skip
    file = workspace / "python" / "bottom.py"
    file.write_text(BOTTOM)
    # Eight rows of text, then the statusline and the command line: line 8 is the window's last row. Tab
    # takes a suggestion at once here (what it takes is under test, not when).
    at_once = "\n  inline = { accept_after_ms = 0 },"
    with nvim_in_tmux(tmp_path, version, server_command, "default", file, rows=10, extra=at_once) as screen:
        screen.keys("8GA")
        screen.wait("insert mode", lambda: "-- INSERT --" in screen.command_line())

        def ghost_lines() -> list[str] | None:
            rows = screen.rows()[: screen.height - 2]  # the text rows: not the statusline, the command line
            at = next((i for i, row in enumerate(rows) if row.startswith("def second(values):")), None)
            if at is None or at + 1 >= len(rows) or not rows[at + 1].strip():
                return None
            lines = [row.rstrip() for row in rows[at + 1 :] if row.strip() and not row.startswith("~")]
            return lines if len(lines) > 1 else None

        shown = screen.wait("a multi-line suggestion", ghost_lines)
        screen.keys("Tab", "Escape")
        screen.wait("normal mode", lambda: "-- INSERT --" not in screen.command_line())
        screen.keys(":w", "Enter")
        screen.wait("the file written", lambda: file.read_text() != BOTTOM)
        # Tab inserted the lines the screen showed, no more.
        assert file.read_text().split("\n")[7:] == [*shown, ""]


def test_the_statusline_shows_indexing_while_the_workspace_is_indexed(
    tmp_path, workspace, server_command, tiny_model_dir
):  # fmt: skip
    # A project (a .git folder marks its root) of 3,000 files: Neovim shows no $/progress, so the
    # statusline says how far the index is, and nothing once it is done.
    (workspace / ".git").mkdir()
    add_modules(workspace)
    with nvim_in_tmux(tmp_path, "0.12", server_command, tiny_model_dir, workspace / FIXTURE) as screen:
        seen: list[str] = []

        def indexing() -> bool:
            found = re.search(r"indexing ([\d,]+)", screen.statusline())
            if found:
                seen.append(found.group(1))
            return bool(seen) and found is None

        screen.wait("indexing in the statusline, then gone", indexing, timeout=120)
        assert any("," in count for count in seen), f"no count over 999 shown as 1,234: {seen}"
        assert re.search(r"dgemma: \S+ cpu", screen.statusline()), screen.statusline()


@pytest.mark.parametrize("version", ["0.12", "0.11"])
def test_the_checkhealth_window_shows_no_dgemma_status(
    version, tmp_path, workspace, server_command, tiny_model_dir
):  # fmt: skip
    with nvim_in_tmux(tmp_path, version, server_command, tiny_model_dir, workspace / FIXTURE) as screen:
        screen.wait("the status of the code window", lambda: "dgemma: " in screen.statusline())
        screen.keys(":checkhealth dgemma", "Enter")
        screen.wait("the health report", lambda: any("dgemma: server" in row for row in screen.rows()))
        statuslines = [row for row in screen.rows() if "health://" in row]
        assert statuslines and not any("dgemma:" in row for row in statuslines), "\n".join(screen.rows())


@pytest.mark.parametrize("version", ["0.12", "0.11"])
def test_the_suggest_key_in_a_terminal_shows_what_the_decision_hid(
    version, tmp_path, workspace, server_command, hiding_model
):  # fmt: skip
    # Alt-\ reaches Neovim through the terminal as ESC \ (tmux sends it so): the mapping must see it.
    with nvim_in_tmux(tmp_path, version, server_command, hiding_model, workspace / FIXTURE) as screen:
        screen.keys(f"{LINE}GA", TYPED)
        screen.wait("the answer to the typed text", lambda: answer(screen.log, "typed") is not None)
        assert answer(screen.log, "typed") == 0
        screen.keys("M-\\")
        screen.wait("ghost text after the suggest key", lambda: typed_row(screen))
        assert answer(screen.log, "asked") == 1
        assert "-- INSERT --" in screen.command_line()
