"""A slow answer settling in Emacs (emacs-nox in tmux, lsp-mode): the canvas drawn at point as it settles
(`dgemma/resolving`), then the answer with its low-confidence parts dimmer (`dgemma/confidence`).

The engine is the slow random-weight model (tests/slow_model.py): every answer runs all its denoising
steps, so each request has partials before its answer. Its text is noise: the test looks at where and
how it is drawn and at the order of events that Emacs records, never at what it says. The times from
request to first partial drawn and to the answer shown are printed (Emacs's clock), not asserted.
"""

from __future__ import annotations

import statistics

import pytest

from tests.e2e import tools
from tests.e2e.conftest import need
from tests.e2e.terminal_png import colours, screenshot
from tests.e2e.test_emacs import LINE, TYPED_LINE, Emacs, lisp, open_emacs, type_typed

pytestmark = [pytest.mark.editors, pytest.mark.emacs]

# No deadline and no drafts: every answer runs all its steps. "eager": the noise is shown, not hidden.
OPTIONS = """
(setq dgemma-eagerness "eager")
(setq dgemma-server-options
      (list :model {model} :device "cpu"
            :completion (list :latencyBudgetMs 0 :drafts :json-false :nextTokenDraft :json-false{extra})))
(defvar dgemma-test-events nil "(what float-time) of each request, partial drawn and answer, newest first")
(advice-add 'lsp-inline-completion-display :around
  (lambda (display &rest args)
    (push (list "ask" (float-time)) dgemma-test-events)
    (prog1 (apply display args)
      (push (list (if (overlayp lsp-inline-completion--overlay) "shown" "none") (float-time))
            dgemma-test-events))))
(advice-add 'dgemma--on-resolving :after
  (lambda (&rest _)
    (when (with-current-buffer "shorten.py" (overlayp dgemma--partial))
      (push (list "partial" (float-time)) dgemma-test-events))))
"""
EVENTS = "(vconcat (mapcar #'vconcat (reverse dgemma-test-events)))"
PARTIAL = "(and (overlayp dgemma--partial) (overlay-get dgemma--partial 'after-string))"


def events(ed: Emacs) -> list[tuple[str, float]]:
    return [(what, at) for what, at in ed.ask(EVENTS, None)]


def pane(ed: Emacs) -> str:
    """The screen with its colours."""
    return ed.tmux("capture-pane", "-e", "-p", "-t", ed.session)


def ansi_row(ed: Emacs, index: int) -> str:
    return pane(ed).split("\n")[index]


def drawn_colours(ed: Emacs, typed: str) -> set[str]:
    """The colours of what is drawn after `typed` on the cursor's row."""
    index = ed.cursor()[1]
    return {colour for char, colour in colours(ansi_row(ed, index))[len(typed) :] if char.strip()}


def settle(ed: Emacs, shot: str | None) -> dict:
    """A partial on the screen before the answer, then the answer: their colours."""
    since = len(events(ed))

    def partial_drawn():
        seen = [what for what, _ in events(ed)[since:]]
        return "partial" in seen and "shown" not in seen and ed.ask(PARTIAL) and ed.ghost_row(TYPED_LINE)

    ed.wait("a partial before the answer", partial_drawn)
    partial = drawn_colours(ed, TYPED_LINE)
    if shot:
        png = need(tools.find_chromium)
        screenshot(pane(ed), tools.ARTIFACTS / f"{shot}-partial.png", png, 1100, 200)
    ed.wait("the answer shown", lambda: "shown" in [what for what, _ in events(ed)[since:]])
    ed.wait("the answer's ghost text", lambda: ed.ghost_row(TYPED_LINE))
    assert not ed.ask(PARTIAL), "the partial is still drawn beside the answer"
    if shot:
        screenshot(pane(ed), tools.ARTIFACTS / f"{shot}-final.png", png, 1100, 200)
    return {"partial": partial, "final": drawn_colours(ed, TYPED_LINE)}


def figures(seen: list[tuple[str, float]]) -> tuple[list[int], list[int]]:
    """ms from each request to its first partial, and to its answer shown."""
    firsts, answers, asked, drawn = [], [], None, False
    for what, at in seen:
        if what == "ask":
            asked, drawn = at, False
        elif what == "partial" and asked is not None and not drawn:
            firsts.append(round((at - asked) * 1000))
            drawn = True
        elif what == "shown" and asked is not None:
            answers.append(round((at - asked) * 1000))
    return firsts, answers


def test_a_slow_answer_settles_at_point_and_its_unsure_part_is_dimmer(
    tmp_path, workspace, server_command, slow_model_dir, artifacts
):  # fmt: skip
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    original = (workspace / "python" / "shorten.py").read_text()
    extra = OPTIONS.format(model=lisp(slow_model_dir), extra="")
    with open_emacs(tmp_path / "on", workspace, server_command, slow_model_dir, extra=extra) as ed:
        type_typed(ed)
        on = settle(ed, "emacs-resolving")
        # A mismatching key typed during a partial removes it at once: none is drawn until a newer
        # request's comes.
        since = len(events(ed))
        ed.type("Q")
        ed.wait(
            "a partial", lambda: "partial" in [what for what, _ in events(ed)[since:]] and ed.ask(PARTIAL)
        )
        asks = [what for what, _ in events(ed)].count("ask")
        ed.type("Z")
        ed.wait("the typed key", lambda: ed.line(LINE) == TYPED_LINE + "QZ")
        assert not ed.ask(PARTIAL) or [what for what, _ in events(ed)].count("ask") > asks
        # TAB during a partial does what it does without a suggestion (indents): never inserts it.
        since = len(events(ed))
        ed.wait(
            "a partial", lambda: "partial" in [what for what, _ in events(ed)[since:]] and ed.ask(PARTIAL)
        )
        ed.keys("Tab")
        ed.wait(
            "the answer to the partial's request",
            lambda: len(events(ed)) > since + 1 and events(ed)[-1][0] != "partial",
        )
        assert ed.line(LINE).strip() == (TYPED_LINE + "QZ").strip(), (
            f"TAB inserted a partial: {ed.line(LINE)!r}"
        )
        firsts, answers = figures(events(ed))
    (workspace / "python" / "shorten.py").write_text(original)
    extra = OPTIONS.format(model=lisp(slow_model_dir), extra=" :showConfidence :json-false")
    with open_emacs(tmp_path / "off", workspace, server_command, slow_model_dir, extra=extra) as ed:
        type_typed(ed)
        off = settle(ed, None)
    print(
        f"\nEmacs, slow model: request to first partial drawn median {statistics.median(firsts)} ms {firsts};"
        f" to the answer shown median {statistics.median(answers)} ms {answers}"
    )
    # With showConfidence off the answer is drawn in one colour; on, its unsure part in the partial's
    # unsettled colour.
    assert len(off["final"]) == 1, off
    dim = on["final"] - off["final"]
    assert dim and dim <= on["partial"], (on, off)
