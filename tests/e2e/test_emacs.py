"""Emacs end to end: emacs-nox in tmux with lsp-mode from its upstream repository, editors/emacs/dgemma.el
and the real server running the tiny test model, typed into like a user.

Emacs starts with -Q: no package.el and so no autoloads, which dgemma.el must do without. The screen is
read with `tmux capture-pane`; what a screen cannot say (the buffer's text, whether a *Warnings* buffer
exists, what the server wrote to stderr) is asked of the running Emacs through emacsclient.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import tools
from tests.e2e.conftest import need

pytestmark = pytest.mark.emacs

DGEMMA_EL = tools.ROOT / "editors" / "emacs"
FIXTURE = "python/shorten.py"
BUFFER = "shorten.py"
LINE = 6  # 1-based: the empty, indented line inside shorten()
TYPED = "result = "
COLUMNS, ROWS = 120, 30
STDERR = {"*dgemma::stderr*": ""}  # the server's stderr buffer, empty
# Emacs warns about lsp-mode's own code when it loads it from source ("Pattern t is deprecated"): lsp-mode's
# business, not this session's.
LSP_MODE_SOURCE = re.compile(r"^\S*lsp-mode/[\w-]+\.el: Warning: ")

INIT = """
(setq make-backup-files nil auto-save-default nil create-lockfiles nil)
;; Native compilation in the background reports the libraries' own compiler warnings in *Warnings*:
;; not what this test looks for, and CPU the model needs.
(when (boundp 'native-comp-deferred-compilation) (setq native-comp-deferred-compilation nil))
(setq server-socket-dir {socket_dir} server-name "dgemma-test")
(server-start)
(setq lsp-session-file {session})
(setq dgemma-server-command (list {server} "--stdio"))
(setq dgemma-server-options (list :model {model} :device "cpu"))
(require 'dgemma)
(lsp-workspace-folders-add {workspace})  ; else lsp-mode asks which project the file belongs to
(add-hook 'python-mode-hook #'lsp)
(defun dgemma-test-answer (file value)
  "Write VALUE to FILE as JSON, for the test to read."
  (with-temp-file file (insert (json-encode value))))
"""


def lisp(value: object) -> str:
    return json.dumps(str(value))  # a JSON string of a plain path is an Emacs Lisp string literal


class Emacs:
    """emacs-nox in a tmux session, and the helpers a test needs to type into it and look at it."""

    def __init__(self, session: str, socket: Path, answers: Path) -> None:
        self.session = session
        self.socket = socket
        self.answers = answers

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", *args], check=True, capture_output=True, text=True, timeout=30)
        return done.stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.session, *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.session, "-l", text)

    def screen(self) -> list[str]:
        return self.tmux("capture-pane", "-p", "-t", self.session).split("\n")

    def cursor(self) -> tuple[int, int]:
        x, y = self.tmux("display-message", "-p", "-t", self.session, "#{cursor_x},#{cursor_y}").split(",")
        return int(x), int(y)

    def ask(self, expression: str, buffer: str | None = BUFFER):
        """The value of an Emacs Lisp expression (in `buffer`), through emacsclient, as JSON."""
        if buffer is not None:
            expression = f"(with-current-buffer {lisp(buffer)} {expression})"
        self.answers.unlink(missing_ok=True)
        subprocess.run(
            ["emacsclient", "--socket-name", str(self.socket), "--eval",
             f"(dgemma-test-answer {lisp(self.answers)} {expression})"],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        return json.loads(self.answers.read_text())

    def line(self, number: int) -> str:
        return self.ask(
            f"(save-excursion (goto-char (point-min)) (forward-line {number - 1})"
            " (buffer-substring-no-properties (line-beginning-position) (line-end-position)))"
        )

    def wait(self, what: str, check, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(subprocess.CalledProcessError):  # Emacs still starting
                value = check()
                if value:
                    return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; the screen:\n" + "\n".join(self.screen()))
            time.sleep(0.2)

    def go_to_end_of_line(self, number: int) -> None:
        self.keys("M-g", "g")
        self.type(str(number))
        self.keys("Enter", "C-e")
        self.wait(f"line {number}", lambda: self.ask("(list (line-number-at-pos) (eolp))") == [number, True])

    def ghost_row(self, typed_line: str) -> tuple[int, str] | None:
        """The screen row of `typed_line` when more is drawn after it (ghost text), and that row."""
        for index, row in enumerate(self.screen()):
            if row.startswith(typed_line) and len(row.rstrip()) > len(typed_line.rstrip()):
                return index, row.rstrip()
        return None

    def problems(self) -> dict:
        """What must stay empty in a normal session: warnings, the server's stderr, errors in the logs."""
        return {
            "warnings": self.ask('(and (get-buffer "*Warnings*") (with-current-buffer "*Warnings*" '
                                 "(buffer-substring-no-properties (point-min) (point-max))))", None),
            "stderr": self.ask(  # lsp-mode keeps each server's stderr in a buffer: {name: text}
                "(mapcar (lambda (b) (cons (buffer-name b) (with-current-buffer b "
                "(buffer-substring-no-properties (point-min) (point-max))))) (seq-filter (lambda (b) "
                '(string-match-p "stderr" (buffer-name b))) (buffer-list)))', None),
            # lsp-mode draws a window/logMessage Error or Warning in the compilation faces.
            "log errors": self.ask(
                '(with-current-buffer "*lsp-log*" (let (found) (save-excursion (goto-char (point-min)) '
                "(while (not (eobp)) (let ((face (get-text-property (point) 'face))) (when (memq face "
                "'(compilation-error compilation-warning)) (push (buffer-substring-no-properties (point) "
                "(line-end-position)) found))) (goto-char (or (next-single-property-change (point) 'face) "
                "(point-max))))) found))", None),
            "messages": [
                line for line in self.ask(
                    '(with-current-buffer "*Messages*" (split-string (buffer-string) "\\n"))', None
                ) if re.search("rror|arning|Unknown notification", line) and not LSP_MODE_SOURCE.match(line)
            ],
        }  # fmt: skip


@pytest.fixture
def emacs(tmp_path: Path, workspace: Path, server_command: Path, tiny_model_dir: Path) -> Iterator[Emacs]:
    binary = need(tools.find_emacs)
    lsp_mode = need(tools.find_lsp_mode)
    libraries = need(tools.find_elpa_libraries)
    if shutil.which("tmux") is None:
        pytest.skip(f"tmux is not installed: run `{tools.INSTALL}`")
    socket_dir = tmp_path / "emacs-server"
    socket_dir.mkdir(mode=0o700)
    init = tmp_path / "init.el"
    init.write_text(
        INIT.format(
            socket_dir=lisp(socket_dir),
            session=lisp(tmp_path / "lsp-session"),
            server=lisp(server_command),
            model=lisp(tiny_model_dir),
            workspace=lisp(workspace),
        )
    )
    load_path = [arg for folder in (*libraries, lsp_mode, DGEMMA_EL) for arg in ("-L", str(folder))]
    command = " ".join([str(binary), "-nw", "-Q", *load_path, "-l", str(init), str(workspace / FIXTURE)])
    session = f"dgemma-emacs-{tmp_path.name}"
    subprocess.run(
        ["tmux", "-f", "/dev/null", "new-session", "-d", "-s", session, "-x", str(COLUMNS), "-y", str(ROWS),
         "-e", "TERM=xterm-256color", "-e", "LANG=C.UTF-8", "-e", f"HOME={tmp_path}", command],
        check=True, timeout=30,
    )  # fmt: skip
    ed = Emacs(session, socket_dir / "dgemma-test", tmp_path / "answer.json")
    try:
        ed.wait("the model to load", lambda: "cpu" in ed.ask("dgemma--status-text"), timeout=90)
        yield ed
    finally:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                ["emacsclient", "--socket-name", str(ed.socket), "--eval", "(kill-emacs)"],
                capture_output=True, timeout=10,
            )  # fmt: skip
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=30)


def test_ghost_text_appears_at_the_cursor_and_tab_accepts_it(emacs: Emacs):
    ed = emacs
    ed.go_to_end_of_line(LINE)
    typed_line = "    " + TYPED
    ed.type(TYPED)
    ed.wait("the typed text", lambda: ed.line(LINE) == typed_line)
    row, shown = ed.wait("ghost text after the typed text", lambda: ed.ghost_row(typed_line), timeout=30)
    # At the cursor: the terminal's cursor sits where the typed text ends, the ghost text after it.
    assert ed.cursor() == (len(typed_line), row)
    assert ed.line(LINE) == typed_line, "ghost text must not be in the buffer before it is accepted"
    assert any("Accept: [TAB" in line for line in ed.screen()), "the echo area names TAB as the accept key"
    ed.keys("Tab")
    ed.wait("the accepted text", lambda: ed.line(LINE) != typed_line)
    assert ed.line(LINE).rstrip() == shown  # exactly what the screen showed on that row
    # The mode line shows the server's status: model, device, latency.
    ed.wait("the status in the mode line", lambda: any("dgemma: " in r and "ms" in r for r in ed.screen()))
    assert ed.problems() == {"warnings": None, "stderr": STDERR, "log errors": None, "messages": []}


def test_lsp_mode_and_the_server_agree_on_utf32_positions(emacs: Emacs):
    # lsp-mode offers utf-32 first; past characters that are one code point but two utf-16 units (😀)
    # or several bytes (é, 你), positions only agree if both count code points.
    ed = emacs
    assert ed.ask("(lsp-get (lsp--workspace-server-capabilities (dgemma--workspace)) :positionEncoding)") == (
        "utf-32"
    )
    ed.go_to_end_of_line(LINE)
    # "words" again: the lookup draft (" = text.split()") makes a suggestion whatever the tiny model writes.
    typed_line = '    s = "é😀你"; words'
    ed.type(typed_line.strip())
    ed.wait("the typed text", lambda: ed.line(LINE) == typed_line)
    _, shown = ed.wait("ghost text after the typed text", lambda: ed.ghost_row(typed_line), timeout=30)
    ed.keys("Tab")
    ed.wait("the accepted text", lambda: ed.line(LINE) != typed_line)
    assert ed.line(LINE).rstrip() == shown
    assert ed.problems() == {"warnings": None, "stderr": STDERR, "log errors": None, "messages": []}


def test_dgemma_el_byte_compiles_without_warnings(tmp_path: Path):
    binary = need(tools.find_emacs)
    lsp_mode = need(tools.find_lsp_mode)
    libraries = need(tools.find_elpa_libraries)
    copy = tmp_path / "dgemma.el"
    shutil.copy(DGEMMA_EL / "dgemma.el", copy)
    load_path = [arg for folder in (*libraries, lsp_mode) for arg in ("-L", str(folder))]
    done = subprocess.run(
        [str(binary), "--batch", "-Q", *load_path, "-f", "batch-byte-compile", str(copy)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    ours = [line for line in done.stderr.splitlines() if line.startswith("dgemma.el:") or "Error" in line]
    assert done.returncode == 0 and ours == [], done.stderr
    assert copy.with_suffix(".elc").is_file()
