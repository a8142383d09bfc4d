"""What any LSP client gets from the real server: only standard messages unless it declares the custom
ones, a quiet stderr, and a log at the level its trace asks for.

A bare JSON-RPC client (tests/e2e/server_probe.py) talks to `dgemma-lsp --stdio` running the tiny test
model, so that every message the server sends is seen, whatever its method.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.e2e.server_probe import RawClient

URI = "file:///project/example.py"
SOURCE = "def shorten(text, width):\n    words = text.split()\n    result = \n    return result\n"
DECLARES_STATUS = {"dgemma": {"status": True}}
LOG_MESSAGE = "window/logMessage"


def run_session(model: Path, stderr: Path, experimental: dict | None = None, trace: str | None = None):
    """initialize, the model loaded, two completions (the first cancelled after its answer, as an editor
    does when the answer crosses a keystroke), shutdown: every message the server sent."""
    capabilities: dict = {"textDocument": {"inlineCompletion": {}}, "window": {"workDoneProgress": True}}
    if experimental is not None:
        capabilities["experimental"] = experimental
    params = {
        "processId": None,
        "rootUri": None,
        "capabilities": capabilities,
        "initializationOptions": {"model": str(model), "device": "cpu"},
    }
    if trace is not None:
        params["trace"] = trace
    with stderr.open("wb") as err:
        client = RawClient([sys.executable, "-m", "dgemma_lsp", "--stdio"], stderr=err, timeout=180)
        try:
            client.answer(client.send("initialize", params))
            client.send("initialized", {}, request=False)
            client.wait_for(model_loaded)
            document = {"uri": URI, "languageId": "python", "version": 1, "text": SOURCE}
            client.send("textDocument/didOpen", {"textDocument": document}, request=False)
            for character in (13, 12):
                asked = client.send(
                    "textDocument/inlineCompletion",
                    {
                        "textDocument": {"uri": URI},
                        "position": {"line": 2, "character": character},
                        "context": {"triggerKind": 1},
                    },
                )
                reply = client.answer(asked)
                assert "result" in reply, reply
                client.send("$/cancelRequest", {"id": asked}, request=False)
        finally:
            client.close()
    return client.received


def model_loaded(message: dict) -> bool:
    return message.get("method") == LOG_MESSAGE and "loaded in" in message["params"]["message"]


def methods(received: list[dict]) -> set[str]:
    return {m["method"] for m in received if "method" in m}


@pytest.mark.parametrize("declared", [False, True])
def test_dgemma_notifications_go_only_to_a_client_that_declares_them(tiny_model_dir, tmp_path, declared):
    received = run_session(tiny_model_dir, tmp_path / "stderr", DECLARES_STATUS if declared else None)
    custom = {method for method in methods(received) if method.startswith("dgemma/")}
    if declared:
        assert custom == {"dgemma/status"}
    else:
        assert custom == set(), "a client that declared nothing got custom notifications"
        assert {"window/logMessage", "$/progress"} <= methods(received)  # standard LSP still flows


def test_stderr_stays_empty_in_a_normal_session(tiny_model_dir, tmp_path):
    # Editors file every stderr line as an error (Neovim's lsp.log): info lines, the InitializeParams
    # and the document's text must not be there.
    run_session(tiny_model_dir, tmp_path / "stderr", DECLARES_STATUS, trace="verbose")
    assert (tmp_path / "stderr").read_text() == ""


@pytest.mark.parametrize("trace", [None, "off", "verbose"])
def test_the_client_log_has_the_detail_its_trace_asks_for(tiny_model_dir, tmp_path, trace):
    received = run_session(tiny_model_dir, tmp_path / "stderr", trace=trace)
    logged = [m["params"] for m in received if m.get("method") == LOG_MESSAGE]
    kinds = {entry["type"] for entry in logged}
    assert any("loaded in" in entry["message"] for entry in logged)  # an info line, at every level
    completions = [entry for entry in logged if entry["message"].startswith("completion at ")]
    if trace == "verbose":
        assert completions and all(entry["type"] == 4 for entry in completions)  # MessageType.Log
    else:
        assert completions == [] and 4 not in kinds and 5 not in kinds
