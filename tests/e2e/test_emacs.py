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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import tools
from tests.e2e.conftest import add_modules, need, poll, requires
from tests.e2e.terminal_png import colours
from tests.e2e.test_nvim import finish_loading, slow_loading_copy

pytestmark = [pytest.mark.editors, pytest.mark.emacs]

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
        def answered():
            with contextlib.suppress(subprocess.CalledProcessError):  # Emacs still starting
                return check()
            return None

        return poll(what, answered, timeout, lambda: "the screen:\n" + "\n".join(self.screen()), every=0.1)

    def go_to_end_of_line(self, number: int) -> None:
        self.keys("M-g", "g")
        self.type(str(number))
        self.keys("Enter", "C-e")
        self.wait(f"line {number}", lambda: self.ask("(list (line-number-at-pos) (eolp))") == [number, True])

    def readable(self) -> bool:
        """A suggestion is shown, and has been long enough for TAB to take it (`dgemma-accept-after`)."""
        return self.ask("(dgemma-suggestion-readable-p)")

    def ghost_row(self, typed_line: str) -> tuple[int, str] | None:
        """The cursor's screen row when it shows `typed_line` and more after it (ghost text), and that row
        (another line may hold the same text, as code)."""
        index = self.cursor()[1]
        row = self.screen()[index]
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


@contextlib.contextmanager
def open_emacs(
    tmp_path: Path, workspace: Path, server: Path, model: Path | str, ready: bool = True, extra: str = ""
) -> Iterator[Emacs]:
    """emacs-nox in tmux editing the fixture with dgemma.el and the server on `model` (`ready`: once the
    model has loaded; `extra`: more Emacs Lisp for the init file)."""
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
            server=lisp(server),
            model=lisp(model),
            workspace=lisp(workspace),
        )
        + extra
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
        if ready:
            ed.wait("the model to load", lambda: "cpu" in ed.ask("dgemma--status-text"), timeout=90)
        else:
            ed.wait("dgemma.el in the buffer", lambda: ed.ask("(bound-and-true-p dgemma-mode)"), timeout=90)
        yield ed
    finally:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                ["emacsclient", "--socket-name", str(ed.socket), "--eval", "(kill-emacs)"],
                capture_output=True, timeout=10,
            )  # fmt: skip
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=30)


@pytest.fixture
def emacs(tmp_path: Path, workspace: Path, server_command: Path, tiny_model_dir: Path) -> Iterator[Emacs]:
    with open_emacs(tmp_path, workspace, server_command, tiny_model_dir) as ed:
        yield ed


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
    # The echo area names the keys that accept, and only keys a terminal delivers.
    echo = ed.screen()[ROWS - 1]
    assert "Accept: [TAB/C-c C-a]" in echo and "C-<return>" not in echo, echo
    ed.wait("the suggestion to be readable", ed.readable)
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
    ed.wait("the suggestion to be readable", ed.readable)
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


def lightness(colour: str) -> float:
    """CIE L* (0 black .. 100 white) of an sRGB colour "#rrggbb"."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    y = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return 116 * y ** (1 / 3) - 16 if y > 216 / 24389 else y * 24389 / 27


# background mode: (the terminal's own text colour, its background), and the init that says so
TERMINALS = {
    "dark": (("#d0d0d0", "#1c1c1c"), ""),  # what Emacs assumes in tmux, as in a dark terminal
    "light": (
        ("#000000", "#ffffff"),
        "(setq frame-background-mode 'light)\n(mapc #'frame-set-background-mode (frame-list))\n",
    ),
}


@pytest.mark.parametrize("background", list(TERMINALS))
def test_the_ghost_text_is_clearly_dimmer_than_code(
    background, tmp_path, workspace, server_command, tiny_model_dir
):
    (code, back), init = TERMINALS[background]
    with open_emacs(tmp_path, workspace, server_command, tiny_model_dir, extra=init) as ed:
        assert ed.ask("(symbol-name (frame-parameter nil 'background-mode))", None) == background
        ed.go_to_end_of_line(LINE)
        typed_line = "    " + TYPED
        ed.type(TYPED)
        row, _ = ed.wait("ghost text after the typed text", lambda: ed.ghost_row(typed_line), timeout=30)
        cells = colours(ed.tmux("capture-pane", "-e", "-p", "-t", ed.session).split("\n")[row])
        ghost = {colour for char, colour in cells[len(typed_line) :] if char.strip()}
        assert ghost and "default" not in ghost, ghost
        # Nearer the background than the code's colour is, by a clear step of lightness (L*).
        for colour in ghost:
            assert abs(lightness(colour) - lightness(code)) >= 25, (colour, code)
            assert abs(lightness(colour) - lightness(back)) < abs(lightness(code) - lightness(back))


COUNT_ASKS = """
(defvar dgemma-test-asked 0 "inlineCompletion displays asked for")
(add-hook 'lsp-before-inline-completion-hook (lambda () (setq dgemma-test-asked (1+ dgemma-test-asked))))
(defvar dgemma-test-timer nil)
"""
# lsp-mode asks on an idle timer after a change: the one after TAB was made and has run.
TIMER_DONE = (
    "(and lsp-inline-completion--idle-timer (not (eq lsp-inline-completion--idle-timer dgemma-test-timer))"
    " (not (memq lsp-inline-completion--idle-timer timer-idle-list)))"
)


def test_tab_that_indents_asks_for_no_suggestion(tmp_path, workspace, server_command, tiny_model_dir):
    # TAB on the empty line indents; a suggestion asked for after it would make the next TAB insert it
    # instead of indenting again.
    with open_emacs(tmp_path, workspace, server_command, tiny_model_dir, extra=COUNT_ASKS) as ed:
        ed.go_to_end_of_line(LINE)
        ed.ask("(progn (delete-horizontal-space) t)")  # an empty line at column 0, which TAB indents
        ed.wait("the empty line", lambda: ed.line(LINE) == "")
        ed.wait("lsp-mode's turn to ask after that", lambda: ed.ask(TIMER_DONE))
        ed.keys("C-g")  # no suggestion shown: TAB is TAB
        ed.wait("no suggestion", lambda: ed.ask("(not (overlayp lsp-inline-completion--overlay))"))
        asked = ed.ask("(progn (setq dgemma-test-timer lsp-inline-completion--idle-timer) dgemma-test-asked)")
        before = ed.line(LINE)
        ed.keys("Tab")
        ed.wait("the indent", lambda: ed.line(LINE) != before)
        ed.wait("lsp-mode's turn to ask", lambda: ed.ask(TIMER_DONE))
        assert ed.ask("dgemma-test-asked") == asked, "a suggestion was asked for after TAB indented"
        indented = ed.line(LINE)
        ed.keys("Tab")
        ed.wait("the second indent", lambda: ed.line(LINE) != indented)
        assert ed.line(LINE).strip() == ""


TAB_ON_SHOW = """
(defvar dgemma-test-tab-on-show nil "when set, TAB comes the moment the next suggestion is shown")
(defvar dgemma-test-second nil "that suggestion's text")
(add-hook 'lsp-inline-completion-shown-hook
  (lambda ()
    (when dgemma-test-tab-on-show
      (setq dgemma-test-tab-on-show nil
            dgemma-test-second (overlay-get lsp-inline-completion--overlay 'after-string)
            unread-command-events (append unread-command-events (listify-key-sequence (kbd "TAB")))))))
"""


def test_a_tab_right_after_an_accept_does_not_take_the_next_suggestion(
    tmp_path, workspace, server_command, tiny_model_dir
):  # fmt: skip
    with open_emacs(tmp_path, workspace, server_command, tiny_model_dir, extra=TAB_ON_SHOW) as ed:
        ed.go_to_end_of_line(LINE)
        typed_line = "    " + TYPED
        ed.type(TYPED)
        ed.wait("ghost text", lambda: ed.ghost_row(typed_line), timeout=30)
        ed.wait("the suggestion to be readable", ed.readable)
        ed.ask("(setq dgemma-test-tab-on-show t)")
        ed.keys("Tab")
        ed.wait("the accepted text", lambda: ed.line(LINE) != typed_line)
        accepted = ed.line(LINE)
        lines = ed.ask("(count-lines (point-min) (point-max))")
        # The next suggestion comes by itself, and a TAB the moment it is shown: a second quick TAB.
        ed.wait("the next suggestion, and the TAB", lambda: ed.ask("(not dgemma-test-tab-on-show)"), 30)
        ed.wait("the TAB done", lambda: ed.ask("(not (overlayp lsp-inline-completion--overlay))"))
        second = ed.ask("dgemma-test-second")
        assert ed.line(LINE).strip() == accepted.strip(), f"the second TAB inserted {second!r}"
        assert ed.ask("(count-lines (point-min) (point-max))") == lines


COUNT_DISPLAYS = """
(defvar dgemma-test-displayed 0 "inline completions asked for and answered")
(advice-add 'lsp-inline-completion-display :after
            (lambda (&rest _) (setq dgemma-test-displayed (1+ dgemma-test-displayed))))
"""


def test_keys_typed_while_the_model_loads_get_a_suggestion_once_it_is_ready(
    tmp_path, workspace, server_command, tiny_model_dir
):  # fmt: skip
    model = slow_loading_copy(tiny_model_dir, tmp_path / "slow-model")
    with open_emacs(tmp_path, workspace, server_command, model, ready=False, extra=COUNT_DISPLAYS) as ed:
        ed.go_to_end_of_line(LINE)
        # "words": the lookup draft (" = text.split()") makes a suggestion whatever the tiny model writes.
        ed.type("words")
        ed.wait("the typed text", lambda: ed.line(LINE) == "    words")
        ed.wait("lsp-mode to ask (and get nothing)", lambda: ed.ask("dgemma-test-displayed") > 0)
        assert "cpu" not in ed.ask("dgemma--status-text"), "the model loaded before the keys were typed"
        assert not ed.ghost_row("    words")
        finish_loading(model)
        # No key after the model is ready: dgemma.el asks again at point by itself.
        ed.wait("a suggestion once the model is ready", lambda: ed.ghost_row("    words"), timeout=30)


def test_the_mode_line_shows_indexing_while_the_workspace_is_indexed(
    tmp_path, workspace, server_command, tiny_model_dir
):  # fmt: skip
    add_modules(workspace)
    with open_emacs(tmp_path, workspace, server_command, tiny_model_dir) as ed:
        seen: list[str] = []

        def indexing() -> bool:
            found = re.search(r"dgemma: \S+ cpu.*?indexing ([\d,]+)", "\n".join(ed.screen()))
            if found:
                seen.append(found.group(1))
            return bool(seen) and found is None

        ed.wait("indexing in the mode line, then gone", indexing, timeout=120)
        assert any("," in count for count in seen), f"no count over 999 shown as 1,234: {seen}"
        assert any("dgemma: " in row and " cpu" in row for row in ed.screen())


PENDING = "(vconcat (mapcar #'vconcat (dgemma-rewrite-pending)))"  # as a JSON list of lists (nil: [])


def rewrite_shown(ed: Emacs) -> list:
    """Run the code action as lsp-mode offers it (the only one: lsp-mode runs it without asking), and
    wait for the preview: [[start, end, new text], ...] in buffer positions."""
    ed.go_to_end_of_line(LINE - 1)
    ed.keys("M-x")
    ed.type("lsp-execute-code-action")
    ed.keys("Enter")
    return ed.wait("the rewrite preview", lambda: ed.ask(PENDING), timeout=60)


def test_the_rewrite_code_action_is_a_preview_that_tab_accepts(emacs: Emacs, server_features):
    requires(server_features, "rewrite")
    ed = emacs
    before = ed.ask("(buffer-string)")
    pending = rewrite_shown(ed)
    assert ed.ask("(buffer-string)") == before, "the rewrite changed the buffer before it was accepted"
    expected = before
    for start, end, new in sorted(pending, reverse=True):
        expected = expected[: start - 1] + new + expected[end - 1 :]
    ed.keys("Tab")
    ed.wait("the accepted rewrite", lambda: ed.ask("(buffer-string)") != before)
    assert ed.ask("(buffer-string)") == expected
    assert ed.ask(PENDING) == []
    assert ed.problems() == {"warnings": None, "stderr": STDERR, "log errors": None, "messages": []}


def test_a_rejected_rewrite_leaves_the_buffer(emacs: Emacs, server_features):
    requires(server_features, "rewrite")
    ed = emacs
    before = ed.ask("(buffer-string)")
    rewrite_shown(ed)
    ed.keys("C-g")
    ed.wait("the preview to go", lambda: ed.ask(PENDING) == [])
    assert ed.ask("(buffer-string)") == before
    assert (
        ed.ask(
            "(seq-some (lambda (o) (overlay-get o 'dgemma-new-text)) (overlays-in (point-min) (point-max)))"
        )
        is None
    )


# The show-or-not decision and the suggest key (C-c \\), with prepared models: their decision.json alone
# decides. Each display lsp-mode ran is noted once it has returned (lsp-mode waits for the server's
# answer and draws it before that): whether it was asked for with the key or while typing, the line
# up to point, and whether a suggestion is shown.
ANSWERS = """
(defvar dgemma-test-answers nil "(how line-before-point shown) of each display answered, newest first")
(advice-add 'lsp-inline-completion-display :around
  (lambda (display &optional implicit)
    (prog1 (funcall display implicit)
      (push (list (if implicit "typed" "asked")
                  (buffer-substring-no-properties (line-beginning-position) (point))
                  (if (overlayp lsp-inline-completion--overlay) "shown" "none"))
            dgemma-test-answers))))
"""
ANSWERED = "(vconcat (mapcar #'vconcat dgemma-test-answers))"  # as JSON: [[how, line, shown], ...]
# lsp-mode's idle timer for the change that made point's text has run (it asks unless inhibited).
ASKED_AFTER_TYPING = (
    "(let ((timer lsp-inline-completion--idle-timer)) (and timer (eq (cadr (timer--args timer)) (point))"
    " (not (memq timer timer-idle-list))))"
)
TYPED_LINE = "    " + TYPED


def answers(ed: Emacs) -> list[list]:
    return [list(answer) for answer in ed.ask(ANSWERED)]


def type_typed(ed: Emacs) -> None:
    ed.go_to_end_of_line(LINE)
    ed.type(TYPED)
    ed.wait("the typed text", lambda: ed.line(LINE) == TYPED_LINE)


@pytest.mark.parametrize("decision", ["showing", "hiding-but-eager"])
def test_a_suggestion_the_decision_keeps_is_shown_while_typing(
    decision, tmp_path, workspace, server_command, showing_model, hiding_model
):  # fmt: skip
    # dgemma-eagerness reaches the server: eager shows what the hiding decision would hide.
    model, init = (
        (showing_model, "") if decision == "showing" else (hiding_model, '(setq dgemma-eagerness "eager")\n')
    )
    with open_emacs(tmp_path, workspace, server_command, model, extra=ANSWERS + init) as ed:
        type_typed(ed)
        ed.wait("ghost text after the typed text", lambda: ed.ghost_row(TYPED_LINE), timeout=30)
        assert ["typed", TYPED_LINE, "shown"] in answers(ed)


def test_one_the_decision_hides_is_not_shown_while_typing_and_c_c_backslash_shows_it(
    tmp_path, workspace, server_command, hiding_model
):  # fmt: skip
    with open_emacs(tmp_path, workspace, server_command, hiding_model, extra=ANSWERS) as ed:
        type_typed(ed)
        answered = ed.wait(
            "the answer to the typed text", lambda: [a for a in answers(ed) if a[:2] == ["typed", TYPED_LINE]]
        )
        assert all(shown == "none" for _, _, shown in answered) and not ed.ghost_row(TYPED_LINE), answered
        ed.keys("C-c", "\\")  # dgemma-suggest: asked for, the server shows what the decision hid
        ed.wait("ghost text after the key", lambda: ed.ghost_row(TYPED_LINE), timeout=30)
        assert answers(ed)[0] == ["asked", TYPED_LINE, "shown"]
        assert ed.line(LINE) == TYPED_LINE
        assert ed.problems() == {"warnings": None, "stderr": STDERR, "log errors": None, "messages": []}


def test_with_the_manual_trigger_typing_asks_for_nothing_and_c_c_backslash_asks(
    tmp_path, workspace, server_command, showing_model
):  # fmt: skip
    init = ANSWERS + '(setq dgemma-trigger "manual")\n'
    with open_emacs(tmp_path, workspace, server_command, showing_model, extra=init) as ed:
        type_typed(ed)
        ed.wait("lsp-mode's turn to ask after the typed text", lambda: ed.ask(ASKED_AFTER_TYPING))
        assert answers(ed) == [] and not ed.ghost_row(TYPED_LINE), "asked for a suggestion while typing"
        ed.keys("C-c", "\\")
        ed.wait("ghost text after the key", lambda: ed.ghost_row(TYPED_LINE), timeout=30)
        assert answers(ed) == [["asked", TYPED_LINE, "shown"]]
