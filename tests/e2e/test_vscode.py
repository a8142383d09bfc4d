"""VS Code end to end: code-server 4.100.3 (VS Code 1.100.3) in headless Chromium, driven by
playwright-core, with the built .vsix installed and the real server running the tiny test model.

What a user would do and see: open a file, type, the ghost text appears, Tab inserts it, the saved
file has it; the status bar shows the model, the device and the last latency; a block rewrite opens
a diff that changes nothing until accepted. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e import tools
from tests.e2e.conftest import FIXTURES, add_modules, need, requires
from tests.e2e.test_nvim import slow_loading_copy

pytestmark = pytest.mark.editors

FIXTURE = "python/shorten.py"
LINE = 6  # 1-based: the empty, indented line inside shorten()
TYPED = "result = "
DRIVER = Path(__file__).with_name("vscode_driver.cjs")


@dataclass
class CodeServer:
    url: str
    home: Path
    env: dict[str, str]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _vsix() -> Path:
    """The built extension; rebuilt here when its sources are newer and its node_modules exist."""
    try:
        return tools.find_vsix()
    except tools.Missing:
        extension = tools.ROOT / "editors" / "vscode"
        if not (extension / "node_modules").is_dir():
            raise
        subprocess.run(["npm", "run", "--silent", "package"], cwd=extension, check=True, capture_output=True)
        return tools.find_vsix()


@contextlib.contextmanager
def running_code_server(
    home: Path, server: Path, model: Path, log_level: str = "info", **settings: object
) -> Iterator[CodeServer]:
    """code-server with the extension installed, its user settings those of a test session (`settings`:
    more of them, or others); `log_level`: the level of every log, the extension's output channel's too."""
    binary = need(tools.find_code_server)
    need(tools.find_playwright)
    need(tools.find_chromium)
    vsix = need(_vsix)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "TMPDIR": str(home / "tmp"),
    }
    (home / "tmp").mkdir()
    user = home / "user-data" / "User"
    user.mkdir(parents=True)
    user_settings = {
        "files.autoSave": "off",
        "files.hotExit": "off",
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.enableExperiments": False,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "security.workspace.trust.enabled": False,
        "chat.commandCenter.enabled": False,
        "editor.minimap.enabled": False,
        "editor.inlineSuggest.enabled": True,
        "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
        "editor.suggestOnTriggerCharacters": False,
        "dgemma.server.path": str(server),
        "dgemma.model": str(model),
        "dgemma.device": "cpu",
        "dgemma.trace.server": "messages",
        **settings,
    }
    (user / "settings.json").write_text(json.dumps(user_settings, indent=2))
    common = ["--user-data-dir", str(home / "user-data"), "--extensions-dir", str(home / "extensions")]
    subprocess.run(
        [str(binary), *common, "--install-extension", str(vsix)],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = _free_port()
    log = (home / "code-server.log").open("w")
    proc = subprocess.Popen(
        [
            str(binary),
            "--auth",
            "none",
            "--bind-addr",
            f"127.0.0.1:{port}",
            *common,
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--log",
            log_level,
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the extension host and the server go with it
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2).read()
                break
            except OSError as err:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"code-server did not start: {(home / 'code-server.log').read_text()[-2000:]}"
                    ) from err
                time.sleep(0.3)
        yield CodeServer(url=url, home=home, env=env)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def code_server(tmp_path_factory, server_command: Path, tiny_model_dir: Path) -> Iterator[CodeServer]:
    home = tmp_path_factory.mktemp("code-server")
    with running_code_server(home, server_command, tiny_model_dir) as running:
        yield running


def drive(
    code_server: CodeServer, workspace: Path, artifacts: Path, name: str, steps: list[dict], **extra
) -> dict:
    """Runs the playwright driver on a fresh browser profile; returns what it saw."""
    scenario = {
        "name": name,
        "url": f"{code_server.url}/?folder={workspace}",
        "playwright": str(need(tools.find_playwright)),
        "chromium": str(need(tools.find_chromium)),
        "profile": str(code_server.home / f"chromium-{name}"),
        "artifacts": str(artifacts),
        "file": Path(FIXTURE).name,
        "path": str(workspace / FIXTURE),  # read back at every save
        "line": LINE,
        "column": 5,
        "readyPattern": "· cpu",
        "logs": str(code_server.home / "user-data" / "logs"),  # the extension's log and its LSP trace
        "steps": steps,
        **extra,
    }
    scenario_file = code_server.home / f"{name}.json"
    scenario_file.write_text(json.dumps(scenario))
    done = subprocess.run(
        [str(need(tools.find_node)), str(DRIVER), str(scenario_file)],
        env=code_server.env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the driver printed nothing: {done.stderr[-3000:]}"
    seen = json.loads(lines[-1])
    if seen.get("error"):
        extension_log = _extension_log(code_server.home)
        pytest.fail(f"{name}: {seen['error']}\nsteps: {seen['steps']}\nextension log:\n{extension_log}")
    return seen


def _extension_log(home: Path) -> str:
    logs = sorted((home / "user-data" / "logs").rglob("*DiffusionGemma*.log"))
    return logs[-1].read_text()[-4000:] if logs else "(no log)"


def visible(text: str) -> str:
    """Text as VS Code draws it: no-break spaces as spaces, control characters as their pictures (U+24xx).

    The tiny test model writes noise, control characters included.
    """
    return "".join(
        " " if ch == "\u00a0" else chr(0x2400 + ord(ch)) if ch < " " and ch != "\t" else ch for ch in text
    )


def test_ghost_text_appears_and_tab_inserts_it(code_server, workspace, artifacts):
    seen = drive(
        code_server,
        workspace,
        artifacts,
        "vscode-completion",
        [
            {"do": "type", "text": TYPED},
            {"do": "waitGhost", "timeout": 60000},
            {"do": "screenshot", "name": "vscode-ghost-text"},
            {"do": "press", "key": "Tab"},
            {"do": "save"},
            {"do": "status", "pattern": r"\d+ ms"},
            {"do": "screenshot", "name": "vscode-accepted"},
        ],
    )
    ghost = seen["ghost"]
    assert ghost["first"].strip(), "the ghost text is empty"
    lines = (workspace / FIXTURE).read_text().split("\n")
    inserted = lines[LINE - 1]
    assert inserted.startswith("    " + TYPED), inserted
    # What Tab put in the file is what the ghost text showed, and the code after it is untouched.
    assert visible(inserted[len("    " + TYPED) :]).rstrip() == visible(ghost["first"]).rstrip()
    original = (FIXTURES / FIXTURE).read_text().split("\n")
    assert lines[LINE:] == original[LINE:]  # a one-line completion: the lines below exactly as they were
    # The status bar shows the model folder, the device and the last completion latency.
    assert tiny_name(code_server) in seen["status"] and "cpu" in seen["status"]


def tiny_name(code_server: CodeServer) -> str:
    settings = json.loads((code_server.home / "user-data" / "User" / "settings.json").read_text())
    return Path(settings["dgemma.model"]).name


def test_rewrite_block_shows_a_diff_and_changes_the_file_only_on_accept(
    code_server, workspace, artifacts, server_features
):
    requires(server_features, "rewrite")
    before = (workspace / FIXTURE).read_text()
    seen = drive(
        code_server,
        workspace,
        artifacts,
        "vscode-rewrite",
        [
            {"do": "command", "title": "DGemma: Rewrite Block"},
            {"do": "waitDiff", "timeout": 60000},
            {"do": "screenshot", "name": "vscode-rewrite-preview"},
            {"do": "save"},
        ],
    )
    assert "DiffusionGemma rewrite" in seen["diffTitle"]
    assert (workspace / FIXTURE).read_text() == before, "the preview changed the file before it was accepted"
    seen = drive(
        code_server,
        workspace,
        artifacts,
        "vscode-rewrite-accept",
        [
            {"do": "command", "title": "DGemma: Rewrite Block"},
            {"do": "waitDiff", "timeout": 60000},
            {"do": "command", "title": "DGemma: Accept Suggested Edit"},
            {"do": "waitNoDiff"},
            {"do": "save"},
            {"do": "screenshot", "name": "vscode-rewrite-accepted"},
        ],
    )
    assert (workspace / FIXTURE).read_text() != before, "accepting the rewrite did not change the file"
    # From the Refactor menu (the light bulb's): the preview again. VS Code asks to resolve every code
    # action it shows, and the extension's preview action has nothing for the server to resolve (that
    # was a server traceback and a failed request in the log, every time).
    (workspace / FIXTURE).write_text(before)
    seen = drive(
        code_server,
        workspace,
        artifacts,
        "vscode-rewrite-action",
        [
            {"do": "refactor", "title": "Rewrite block with DiffusionGemma (preview)"},
            {"do": "waitDiff", "timeout": 60000},
        ],
    )
    assert "DiffusionGemma rewrite" in seen["diffTitle"]
    log = _extension_log(code_server.home)
    assert "codeAction/resolve failed" not in log and "Traceback" not in log, log


def test_next_edit_is_shown_and_applied_only_on_tab(code_server, workspace, artifacts, server_features):
    requires(server_features, "next_edit")
    before = (workspace / FIXTURE).read_text()
    seen = drive(
        code_server,
        workspace,
        artifacts,
        "vscode-next-edit",
        [
            {"do": "command", "title": "DGemma: Suggest Next Edit"},
            {"do": "statusItem", "text": "DGemma next edit", "timeout": 60000},
            {"do": "screenshot", "name": "vscode-next-edit"},
            {"do": "save"},
            {"do": "press", "key": "Tab"},
            {"do": "noStatusItem", "text": "DGemma next edit"},
            {"do": "save"},
        ],
    )
    assert "Tab accepts" in seen["statusItem"]
    saves = [step for step in seen["steps"] if step["step"] == "saved"]
    assert len(saves) == 2
    assert saves[0]["text"] == before, "the next edit changed the file before Tab"
    after = (workspace / FIXTURE).read_text()
    assert saves[1]["text"] == after
    assert after != before, "Tab did not apply the next edit"
    # Only the suggested region changed: the lines before the cursor are as they were.
    assert after.split("\n")[: LINE - 1] == before.split("\n")[: LINE - 1]


@pytest.fixture(scope="module")
def code_server_without_server(tmp_path_factory, tiny_model_dir: Path) -> Iterator[CodeServer]:
    home = tmp_path_factory.mktemp("code-server-no-server")
    with running_code_server(home, home / "no" / "dgemma-lsp", tiny_model_dir) as running:
        yield running


def test_open_settings_in_the_no_server_message_shows_the_setting(
    code_server_without_server, workspace, artifacts
):
    seen = drive(
        code_server_without_server,
        workspace,
        artifacts,
        "vscode-no-server",
        [
            {"do": "clickNotification", "button": "Open Settings"},
            {"do": "settingsEditor"},
            {"do": "screenshot", "name": "vscode-no-server-settings"},
        ],
        readyPattern="no server",
    )
    assert "was not found" in seen["notification"] or "not found" in seen["notification"]
    settings = seen["settings"]
    # The tab the settings editor opened on shows the setting (code-server's User tab said "No
    # Settings Found": a machine-overridable setting lives under Remote there).
    assert not settings["noResults"] and any("Path" in item for item in settings["items"]), settings


def test_a_tab_right_after_an_accept_inserts_a_tab_not_the_next_suggestion(code_server, workspace, artifacts):
    seen = drive(
        code_server,
        workspace,
        artifacts,
        "vscode-second-tab",
        [
            {"do": "type", "text": TYPED},
            {"do": "waitGhost", "timeout": 60000},
            {"do": "press", "key": "Tab"},
            {"do": "waitNoGhost"},
            {"do": "tabWhenGhost", "timeout": 60000},
            {"do": "save"},
        ],
    )
    first, second = seen["ghost"]["first"], seen["second"]["first"]
    line = (workspace / FIXTURE).read_text().split("\n")[LINE - 1]
    accepted = "    " + TYPED + visible(first).rstrip()
    assert visible(line).startswith(accepted), (line, accepted)
    assert visible(line)[len(accepted) :].strip() == "", f"the second Tab inserted the suggestion {second!r}"


def typed_while_loading(model: Path) -> list[dict]:
    """Steps: keys typed while `model` (a `slow_loading_copy`) loads, then its load let go on."""
    return [
        # "words": the lookup draft (" = text.split()") makes a suggestion whatever the model writes.
        {"do": "type", "text": "words"},
        {"do": "status", "pattern": "loading|DGemma$"},
        {"do": "writeFile", "path": str(model / "training.json"), "text": "{}"},
    ]


def test_keys_typed_while_the_model_loads_get_a_suggestion_once_it_is_ready(
    tmp_path_factory, workspace, artifacts, server_command, tiny_model_dir
):  # fmt: skip
    home = tmp_path_factory.mktemp("code-server-slow-model")
    model = slow_loading_copy(tiny_model_dir, home / "slow-model")
    with running_code_server(home, server_command, model) as slow:
        seen = drive(
            slow,
            workspace,
            artifacts,
            "vscode-typed-while-loading",
            [
                *typed_while_loading(model),
                {"do": "waitGhost", "timeout": 30000},  # no key after the model is ready
            ],
            readyPattern="DGemma",
        )
    assert seen["ghost"]["first"].strip()
    assert "· cpu" not in seen["steps"][-3]["text"], "the model was ready before the keys were typed"


def test_the_status_bar_shows_indexing_while_the_workspace_is_indexed(code_server, workspace, artifacts):
    add_modules(workspace)
    seen = drive(
        code_server,
        workspace,
        artifacts,
        "vscode-indexing",
        [
            {"do": "status", "pattern": r"indexing \d{1,3}(,\d{3})+", "timeout": 60000},
            {"do": "status", "pattern": r"^(?!.*indexing).*· cpu", "timeout": 120000},
        ],
        readyPattern="DGemma",
    )
    shown = [step["text"] for step in seen["steps"] if step["step"] == "status"]
    assert "indexing" in shown[0] and "indexing" not in shown[1], shown


# The show-or-not decision and the trigger key, with prepared models (their decision.json alone decides)
# named in the workspace's settings. The LSP trace (verbose: with params and results) says when the
# server has answered the request made at the cursor after the typed text, and with how many items:
# vscode-languageclient writes it only when its output channel logs at the trace level.


@pytest.fixture(scope="module")
def tracing_code_server(tmp_path_factory, server_command: Path, tiny_model_dir: Path) -> Iterator[CodeServer]:
    home = tmp_path_factory.mktemp("code-server-trace")
    with running_code_server(home, server_command, tiny_model_dir, log_level="trace") as running:
        yield running


AT_TYPED = {"line": LINE - 1, "character": len("    " + TYPED)}
TYPING, ASKED = 2, 1  # LSP InlineCompletionTriggerKind: Automatic, Invoked
SUGGEST_KEY = "Alt+Backslash"  # the extension binds it to editor.action.inlineSuggest.trigger


def workspace_settings(workspace: Path, model: Path, **settings: object) -> None:
    """The workspace's .vscode/settings.json: the model, a verbose LSP trace and `settings`."""
    folder = workspace / ".vscode"
    folder.mkdir(exist_ok=True)
    values = {"dgemma.model": str(model), "dgemma.trace.server": "verbose", **settings}
    (folder / "settings.json").write_text(json.dumps(values, indent=2))


@pytest.mark.parametrize("decision", ["showing", "hiding-but-eager"])
def test_a_suggestion_the_decision_keeps_is_shown_while_typing(
    decision, tracing_code_server, workspace, artifacts, showing_model, hiding_model
):  # fmt: skip
    if decision == "showing":
        workspace_settings(workspace, showing_model)
    else:  # the user's eagerness reaches the server: eager shows what the decision would hide
        workspace_settings(workspace, hiding_model, **{"dgemma.completion.eagerness": "eager"})
    seen = drive(
        tracing_code_server,
        workspace,
        artifacts,
        f"vscode-decision-{decision}",
        [
            {"do": "type", "text": TYPED},
            {"do": "waitAnswer", "triggerKind": TYPING, **AT_TYPED},
            {"do": "waitGhost", "timeout": 30000},
        ],
    )
    assert seen["answers"][0]["items"] >= 1 and seen["ghost"]["first"].strip()


def nothing_while_typing_then_the_key_shows_one(code_server, workspace, artifacts, name: str) -> None:
    """Typed: the server's answer to the request at the cursor holds nothing and nothing is drawn; then
    Alt+\\ asks (Invoked, as VS Code's trigger command asks) and its answer is drawn."""
    seen = drive(
        code_server,
        workspace,
        artifacts,
        name,
        [
            {"do": "type", "text": TYPED},
            {"do": "waitAnswer", "triggerKind": TYPING, **AT_TYPED},
            {"do": "screenshot", "name": f"{name}-typed"},
            {"do": "press", "key": SUGGEST_KEY},
            {"do": "waitAnswer", "triggerKind": ASKED, **AT_TYPED},
            {"do": "waitGhost", "timeout": 30000},
            {"do": "screenshot", "name": f"{name}-asked"},
        ],
    )
    typing, asked = seen["answers"]
    assert typing["items"] == 0 and typing["ghost"] == {"first": "", "more": []}, typing
    assert asked["items"] >= 1 and seen["ghost"]["first"].strip(), asked


def test_one_the_decision_hides_is_not_shown_while_typing_and_alt_backslash_shows_it(
    tracing_code_server, workspace, artifacts, hiding_model
):  # fmt: skip
    workspace_settings(workspace, hiding_model)
    nothing_while_typing_then_the_key_shows_one(
        tracing_code_server, workspace, artifacts, "vscode-decision-hiding"
    )


def test_with_the_manual_trigger_nothing_is_shown_while_typing_and_alt_backslash_shows_it(
    tracing_code_server, workspace, artifacts, showing_model
):  # fmt: skip
    workspace_settings(workspace, showing_model, **{"dgemma.completion.trigger": "manual"})
    nothing_while_typing_then_the_key_shows_one(
        tracing_code_server, workspace, artifacts, "vscode-manual-trigger"
    )


def test_what_was_typed_while_the_model_loaded_is_asked_again_as_typing_asks(
    tracing_code_server, workspace, artifacts, hiding_model, tmp_path
):  # fmt: skip
    # Once the model is ready the extension asks again at the cursor with VS Code's trigger command,
    # which asks as the user's key does: sent as Invoked, the server would show what the decision hides.
    model = slow_loading_copy(hiding_model, tmp_path / "slow-hiding-model")
    workspace_settings(workspace, model)
    seen = drive(
        tracing_code_server,
        workspace,
        artifacts,
        "vscode-asked-again-as-typing",
        [
            *typed_while_loading(model),
            {"do": "waitAnswer", "triggerKind": TYPING, "line": LINE - 1, "character": 9, "since": "ready"},
        ],
        readyPattern="DGemma",
    )
    (again,) = seen["answers"]
    assert again["items"] == 0 and again["ghost"] == {"first": "", "more": []}, again


# The suggestion as it settles (dgemma/resolving) with the slow random-weight model (answers take most of
# a second): the extension draws each partial as an `after` decoration at the cursor, the settled runs in
# the ghost text's colour and the rest dimmer, until the final suggestion replaces it. The driver records
# every frame that changed what is drawn at the cursor; the LSP trace (verbose) gives the requests, their
# partials and their answers, with the times they were logged.


@pytest.fixture(scope="module")
def slow_code_server(tmp_path_factory, server_command: Path, slow_model_dir: Path) -> Iterator[CodeServer]:
    home = tmp_path_factory.mktemp("code-server-slow-engine")
    settings = {"dgemma.trace.server": "verbose", "dgemma.completion.latencyBudgetMs": 0}
    with running_code_server(home, server_command, slow_model_dir, log_level="trace", **settings) as running:
        yield running


def shown_text(spans: list[dict]) -> str:
    """What a partial's spans put on the request's line (the extension draws its first line)."""
    return "".join(span["text"] for span in spans).split("\n", 1)[0]


def partial_text(frame: dict) -> str:
    return "".join(piece["text"] for piece in frame["partial"])


def request_at(seen: dict, position: dict) -> dict:
    """The last inline completion request of the trace at `position` that was answered, with its
    partials (matched as the extension matches them: document version and position) and its response."""
    events = seen["lsp"]
    answered = {e["id"] for e in events if e["kind"] == "response"}
    asked = [
        e
        for e in events
        if e["kind"] == "request"
        and e["id"] in answered
        and (e["params"]["position"]["line"], e["params"]["position"]["character"])
        == (position["line"], position["character"])
    ]
    assert asked, f"no answered request at {position}: {events}"
    request = asked[-1]
    version = request["params"]["textDocument"].get("version")
    partials = [
        e
        for e in events
        if e["kind"] == "resolving"
        and e["params"]["position"] == request["params"]["position"]
        and (version is None or e["params"]["version"] == version)
        and e["at"] >= request["at"]
    ]
    response = next(e for e in events if e["kind"] == "response" and e["id"] == request["id"])
    return {"request": request, "partials": partials, "response": response}


def test_a_slow_suggestion_is_drawn_as_it_settles_then_replaced_by_the_final_one(
    slow_code_server, workspace, artifacts
):  # fmt: skip
    seen = drive(
        slow_code_server,
        workspace,
        artifacts,
        "vscode-resolving",
        [
            {"do": "record"},
            {"do": "type", "text": TYPED},
            {"do": "waitPartial", "pieces": 2, "timeout": 60000},
            {"do": "screenshot", "name": "vscode-resolving-partial"},
            {"do": "waitFrameGhost", "timeout": 120000},
            {"do": "screenshot", "name": "vscode-resolving-final"},
            {"do": "timeline"},
        ],
    )
    (artifacts / "vscode-resolving.json").write_text(json.dumps(seen, indent=1))
    asked = request_at(seen, AT_TYPED)
    assert asked["partials"], "the server sent no partial for the request at the cursor"
    frames = [f for f in seen["frames"] if f["at"] >= asked["request"]["at"]]
    first_partial = next(f for f in frames if f["partial"])
    first_ghost = next(f for f in frames if f["ghost"])
    assert first_partial["at"] < first_ghost["at"], "the final suggestion came before any partial was drawn"
    # What was drawn is a partial of that request: its settled head in the ghost text's colour, the rest
    # dimmer; and every frame drawing a partial shows one the server sent for it.
    sent = [shown_text(p["params"]["spans"]) for p in asked["partials"]]
    drawn = [partial_text(f) for f in frames if f["partial"]]
    assert all(text in sent for text in drawn), (drawn, sent)
    two_colours = [f for f in frames if len(f["partial"]) == 2]
    assert two_colours and two_colours[0]["partial"][0]["color"] != two_colours[0]["partial"][1]["color"]
    # The final suggestion replaced the partial: from its first frame on, no partial is drawn.
    assert all(not f["partial"] for f in frames if f["at"] >= first_ghost["at"]), frames
    sent_at = asked["request"]["at"]
    print(
        f"\nVS Code, slow engine: request to first visible partial {first_partial['at'] - sent_at} ms, "
        f"to the final suggestion {first_ghost['at'] - sent_at} ms"
    )


def during_a_partial(
    slow_code_server, workspace, artifacts, name: str, action: dict, then: tuple[dict, ...] = ()
) -> dict:
    """Types TYPED, and once a partial is drawn does `action` (a step), then waits until nothing
    of it is drawn, and does `then` (the newer request's ghost text, by default); what the driver saw."""
    return drive(
        slow_code_server,
        workspace,
        artifacts,
        name,
        [
            {"do": "record"},
            {"do": "type", "text": TYPED},
            {"do": "waitPartial", "timeout": 60000},
            {"do": "mark"},
            action,
            {"do": "waitNoPartial", "timeout": 30000},
            *(then or ({"do": "waitFrameGhost", "timeout": 120000},)),
            {"do": "save"},
            {"do": "timeline"},
        ],
    )


def assert_replaced(seen: dict, position: dict) -> None:
    """After the mark, the partial drawn went before the newer request at `position` drew anything."""
    mark = seen["mark"]
    newer = request_at(seen, position)
    assert newer["request"]["at"] >= mark - 5, "no newer request after the key"
    after = [f for f in seen["frames"] if f["at"] >= mark]
    emptied = next(f["at"] for f in after if not f["partial"])
    drawn_again = [f["at"] for f in after if f["partial"]]
    first_newer = min((p["at"] for p in newer["partials"]), default=None)
    if first_newer is not None:
        assert all(at < emptied or at >= first_newer for at in drawn_again), (after, first_newer)


def test_a_key_that_does_not_match_the_partial_removes_it(slow_code_server, workspace, artifacts):
    seen = during_a_partial(
        slow_code_server, workspace, artifacts, "vscode-resolving-key", {"do": "type", "text": "#"}
    )
    assert_replaced(seen, {"line": LINE - 1, "character": len("    " + TYPED) + 1})


def test_a_newer_request_replaces_the_partial(slow_code_server, workspace, artifacts):
    seen = during_a_partial(
        slow_code_server, workspace, artifacts, "vscode-resolving-newer", {"do": "press", "key": SUGGEST_KEY}
    )
    assert_replaced(seen, AT_TYPED)
    requests = [e for e in seen["lsp"] if e["kind"] == "request"]
    asked = [e for e in requests if e["params"]["context"]["triggerKind"] == ASKED]
    assert asked and asked[-1]["at"] >= seen["mark"] - 5, "Alt+\\ asked for nothing"


def test_tab_during_a_partial_does_not_insert_it(slow_code_server, workspace, artifacts):
    seen = during_a_partial(
        slow_code_server,
        workspace,
        artifacts,
        "vscode-resolving-tab",
        {"do": "press", "key": "Tab"},
        # the answer at the Tab (after it the random model's suggestion is often cut to nothing)
        then=(
            {
                "do": "waitAnswer",
                "triggerKind": TYPING,
                "line": LINE - 1,
                "character": len("    " + TYPED) + 3,
            },
        ),
    )
    shown = [partial_text(f) for f in seen["frames"] if f["partial"] and f["at"] < seen["mark"]]
    line = (workspace / FIXTURE).read_text().split("\n")[LINE - 1]
    assert line.strip() == TYPED.strip(), f"Tab inserted more than a tab: {line!r} (partial {shown[-1]!r})"
    assert line.startswith("    " + TYPED) and len(line) > len("    " + TYPED), f"Tab did nothing: {line!r}"
