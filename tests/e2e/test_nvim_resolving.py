"""A slow answer settling on a Neovim screen (tmux): the canvas drawn as it settles (`dgemma/resolving`),
then the answer with its low-confidence parts dimmer (`dgemma/confidence`).

The engine is the slow random-weight model (tests/slow_model.py): every answer runs all its denoising
steps, so each request has partials before its answer. Its text is noise, so the tests look at where
and how it is drawn, and at the order of the plugin's log lines, never at what it says. The times from
request to first visible text and to the answer are printed (the plugin's own clock), not asserted.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from tests.e2e import tools
from tests.e2e.conftest import need
from tests.e2e.terminal_png import colours, screenshot
from tests.e2e.test_nvim import FIXTURE, LINE, TYPED
from tests.e2e.test_nvim_screen import ESCAPES, Screen, nvim_in_tmux

pytestmark = pytest.mark.editors

# No deadline and no drafts: every answer runs all its steps. "eager": the noise is shown, not hidden.
SLOW = (
    ', completion = {{ latencyBudgetMs = 0, drafts = false, nextTokenDraft = false, eagerness = "eager"{} }}'
)
PARTIAL = re.compile(
    r"partial of request (?P<id>\d+) at (?P<line>\d+):(?P<col>\d+): \d+ bytes after (?P<ms>\d+) ms"
)
ANSWER = re.compile(
    r"answer at (?P<line>\d+):(?P<col>\d+) \(\w+\): (?P<count>\d+) suggestion\(s\) after (?P<ms>\d+) ms"
)
# A request's own line, not a partial's ("partial of request N at ..." holds the same words).
REQUEST = re.compile(r"(?<!of )request (?P<id>\d+) at (?P<line>\d+):(?P<col>\d+)")
PREFIX = "    " + TYPED


def log_lines(screen: Screen) -> list[str]:
    return screen.log.read_text().splitlines() if screen.log.exists() else []


def first(pattern: re.Pattern, screen: Screen, column: int, since: int = -1) -> tuple[int, re.Match] | None:
    """The first log line after line `since` (its index and match) of `pattern` at line LINE, `column`
    (0-based bytes)."""
    for at, line in enumerate(log_lines(screen)):
        found = pattern.search(line)
        if at > since and found and found["line"] == str(LINE) and found["col"] == str(column):
            return at, found
    return None


def figures(screen: Screen) -> tuple[list[int], list[int]]:
    """The plugin's times from each request to its first partial drawn, and to each answer (ms)."""
    firsts: dict[str, int] = {}
    answers = []
    for line in log_lines(screen):
        if found := PARTIAL.search(line):
            firsts.setdefault(found["id"], int(found["ms"]))
        elif found := ANSWER.search(line):
            answers.append(int(found["ms"]))
    return list(firsts.values()), answers


def after_typed(screen: Screen, typed: str) -> tuple[str, list[str]] | None:
    """What is drawn after `typed` on the row that holds it, and each drawn cell's colour."""
    for ansi in screen.ansi_rows():
        plain = ESCAPES.sub("", ansi).rstrip()
        if plain.startswith(typed):
            cells = colours(ansi)[len(typed) : len(plain)]
            return plain[len(typed) :], [colour for char, colour in cells if char.strip()]
    return None


def code_colours(screen: Screen, typed: str) -> set[str]:
    ansi = next(row for row in screen.ansi_rows() if ESCAPES.sub("", row).startswith(typed))
    return {colour for char, colour in colours(ansi)[4 : len(typed)] if char.strip()}


def partial_shown(screen: Screen, typed: str, column: int):
    """A partial of the request at `column` drawn after `typed`, its answer not come: the colours drawn."""
    drawn, answer = first(PARTIAL, screen, column), first(ANSWER, screen, column)
    shown = after_typed(screen, typed)
    return drawn and answer is None and shown and shown[0].strip() and shown


def settle(screen: Screen, typed: str, column: int, artifacts: Path | None, name: str) -> dict:
    """Waits for a partial of the request at `column` on the screen before its answer, then the answer;
    their colours and the plugin's times."""
    _, partial_colours = screen.wait(
        "a partial before the answer", lambda: partial_shown(screen, typed, column)
    )
    if artifacts is not None:
        chromium = need(tools.find_chromium)
        screenshot("\n".join(screen.ansi_rows()), artifacts / f"nvim-{name}-partial.png", chromium, 830, 300)
    answer_at, answer = screen.wait("the answer", lambda: first(ANSWER, screen, column))
    partial_at, partial = first(PARTIAL, screen, column)
    assert partial_at < answer_at, "the partial was drawn after the answer"
    assert int(answer[3]) > 0, f"the slow model's answer had no suggestion: {answer[0]}"

    def final_shown():
        shown = after_typed(screen, typed)
        return shown if shown and shown[0].strip() else None

    _, final_colours = screen.wait("the answer's ghost text", final_shown)
    if artifacts is not None:
        screenshot("\n".join(screen.ansi_rows()), artifacts / f"nvim-{name}-final.png", chromium, 830, 300)
    return {
        "partial_colours": set(partial_colours),
        "final_colours": set(final_colours),
        "code": code_colours(screen, typed),
        "first_ms": int(partial[4]),
        "answer_ms": int(answer[4]),
    }


@pytest.mark.parametrize("version", ["0.12", "0.11"])
def test_a_slow_answer_settles_on_the_screen_and_its_unsure_part_is_dimmer(
    version, tmp_path, workspace, server_command, slow_model_dir, artifacts
):  # fmt: skip
    file = workspace / FIXTURE
    original = file.read_text()
    for case in ("on", "off"):
        (tmp_path / case).mkdir()
    with nvim_in_tmux(
        tmp_path / "on", version, server_command, slow_model_dir, file, server_extra=SLOW.format("")
    ) as screen:
        screen.keys(f"{LINE}GA")
        screen.type(TYPED)
        on = settle(screen, PREFIX, len(PREFIX), artifacts if version == "0.12" else None, "resolving")
        # A mismatching key typed during a partial removes it at once: the row shows the key and nothing
        # after it until a newer request's partial comes (its log line says so).
        screen.type("Q")
        screen.wait("a partial", lambda: partial_shown(screen, PREFIX + "Q", len(PREFIX) + 1))
        screen.type("Z")
        shown = screen.wait("the typed key", lambda: after_typed(screen, PREFIX + "QZ"))
        assert not shown[0].strip() or first(PARTIAL, screen, len(PREFIX) + 2), (
            f"left on screen: {shown[0]!r}"
        )
        # A newer request (the suggest key) during a partial: no partial of the older one after it.
        typed, column = PREFIX + "QZ", len(PREFIX) + 2
        older_at, older = screen.wait("a partial", lambda: first(PARTIAL, screen, column))
        screen.keys("M-\\")
        newer_at, newer = screen.wait("the newer request", lambda: first(REQUEST, screen, column, older_at))
        assert newer["id"] != older["id"]

        def newer_partial():
            found = first(PARTIAL, screen, column, newer_at)
            shown = after_typed(screen, typed)
            return found and found[1]["id"] == newer["id"] and shown and shown[0].strip()

        # Tab during a partial types itself (here it indents): the partial is never inserted.
        screen.wait("a partial of the newer request", newer_partial)
        screen.keys("Tab", "Escape", ":w", "Enter")
        screen.wait("the file written", lambda: file.read_text().split("\n")[LINE - 1].startswith(typed))
        written = file.read_text().split("\n")[LINE - 1]
        assert not written[len(typed) :].strip(), f"Tab inserted a partial: {written!r}"
        stale = [
            line
            for line in log_lines(screen)[newer_at:]
            if (m := PARTIAL.search(line)) and m["id"] == older["id"]
        ]
        assert not stale, f"partials of the older request drawn after the newer one: {stale}"
        firsts, answers = figures(screen)
    file.write_text(original)
    with nvim_in_tmux(
        tmp_path / "off",
        version,
        server_command,
        slow_model_dir,
        file,
        server_extra=SLOW.format(", showConfidence = false"),
    ) as screen:
        screen.keys(f"{LINE}GA")
        screen.type(TYPED)
        off = settle(screen, PREFIX, len(PREFIX), None, "")
    print(
        f"\nNeovim {version}, slow model: request to first visible text median "
        f"{statistics.median(firsts)} ms {firsts}; to the answer median "
        f"{statistics.median(answers)} ms {answers}"
    )
    # With showConfidence off the answer is drawn in one colour; on, its unsure part in another, the
    # partial's unsettled colour, neither of them the code's.
    assert len(off["final_colours"]) == 1, off
    dim = on["final_colours"] - off["final_colours"]
    assert dim, f"no part of the answer drawn dimmer: on {on['final_colours']}, off {off['final_colours']}"
    assert dim <= on["partial_colours"] and not dim & on["code"], (dim, on)
