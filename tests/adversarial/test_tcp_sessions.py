"""Each TCP connection is a session of its own (issue 47, item 1): two clients, one after the other and
at once, a client that drops without `shutdown`, one that initializes twice, one past the limit.

Client A presents the token and a folder whose helpers.py holds the marker; the tiny model completes
`render_table_with_` with it only from the index (tests/repository/test_server_workspace.py). Client
B has no token: nothing of A's (index, buffers, answers, log lines) may reach it, and A keeps working.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adversarial.tcp_client import Served, TcpClient, tcp_server

pytestmark = pytest.mark.adversarial

HELPERS = (
    "def build_report(rows):\n    table = render_table_with_borders(rows, padding=2)\n    return table\n"
)
MAIN = "def build_summary(rows):\n    table = render_table_with_\n"
CURSOR = (1, len("    table = render_table_with_"))
MARKER = "borders"  # only A's helpers.py holds it
BUFFER_URI = "file:///unsaved/only_in_a_buffer.py"  # a buffer of A's, on no disk
LATER_URI = "file:///unsaved/opened_later_by_a.py"
BUFFER = "API_TOKEN_OF_A = 'buffer-only'\n"
NOT_READ = "are not read"  # the server's line when a client's folders are not read


def project(root: Path) -> Path:
    (root / "report").mkdir(parents=True)
    (root / "report" / "helpers.py").write_text(HELPERS)
    (root / "app.py").write_text(MAIN)
    return root


def bare(root: Path) -> Path:
    """A folder of B's: the same app.py, no helpers."""
    root.mkdir(parents=True)
    (root / "app.py").write_text(MAIN)
    return root


def trusted_client(served: Served, root: Path) -> TcpClient:
    """A with its token: its folder indexed and its completion drawing on it (the tests' control)."""
    a = TcpClient(served, first_id=1000)
    a.initialize(folders=[root], token=served.token())
    a.wait_log("indexed ")
    a.open((root / "app.py").as_uri(), MAIN)
    a.open(BUFFER_URI, BUFFER)
    assert a.completion_text((root / "app.py").as_uri(), *CURSOR).startswith(MARKER)
    return a


def assert_nothing_of_a(b: TcpClient, a_root: Path, uri: str) -> None:
    """B's completion, B's view of A's buffer and everything B received hold nothing of A's."""
    assert MARKER not in b.completion_text(uri, *CURSOR)
    answer = b.complete(BUFFER_URI, 0, 3)
    assert "error" in answer, answer  # A's buffer is not open in B's session
    received = json.dumps(b.received)
    assert str(a_root) not in received and "API_TOKEN_OF_A" not in received
    assert b.foreign_responses() == []


def under(opened: set[str], root: Path) -> set[str]:
    return {path for path in opened if path.startswith(str(root))}


def test_two_clients_at_once_share_nothing(tmp_path, tiny_model_dir):
    a_root, b_root, b_added = project(tmp_path / "a"), bare(tmp_path / "b"), project(tmp_path / "b-added")
    with tcp_server(tmp_path, "--model", str(tiny_model_dir)) as served:
        a = trusted_client(served, a_root)
        b = TcpClient(served)
        b.initialize(folders=[b_root])
        b.wait_log(NOT_READ)
        a.open(LATER_URI, BUFFER)  # a buffer A opens while B is connected
        answer = b.complete(LATER_URI, 0, 3)
        assert "error" in answer, answer  # is not open in B's session
        a_uri = (a_root / "app.py").as_uri()
        assert a.completion_text(a_uri, *CURSOR).startswith(MARKER)  # answered on A's socket
        b.wait_log("loaded in")  # B's own model
        since = b.mark()
        added = {"event": {"added": [{"uri": b_added.as_uri(), "name": "b-added"}], "removed": []}}
        b.notify("workspace/didChangeWorkspaceFolders", added)
        b.wait_log(NOT_READ, since=since)  # the folder B added is not read either
        b_uri = (b_root / "app.py").as_uri()
        b.open(b_uri, MAIN)
        assert_nothing_of_a(b, a_root, b_uri)
        b.close()
        assert a.completion_text(a_uri, *CURSOR).startswith(MARKER)  # and after B left
        assert a.foreign_responses() == []
        opened = served.opened()
    assert under(opened, a_root)  # the audit sees the reads it should
    assert not under(opened, b_root) and not under(opened, b_added)


def test_a_client_that_drops_leaves_nothing_for_the_next(tmp_path, tiny_model_dir):
    a_root = project(tmp_path / "a")
    with tcp_server(tmp_path, "--model", str(tiny_model_dir)) as served:
        a = trusted_client(served, a_root)
        a.drop()  # no shutdown, no exit
        b = TcpClient(served)
        b.initialize(folders=[a_root])  # A's very folder, without the token
        b.wait_log(NOT_READ)
        b.wait_log("loaded in")
        a_uri = (a_root / "app.py").as_uri()
        b.open(a_uri, MAIN)
        assert_nothing_of_a(b, a_root, a_uri)
        b.close()


def test_initialize_again_without_the_token_stops_the_index(tmp_path, tiny_model_dir):
    root = project(tmp_path / "a")
    uri = (root / "app.py").as_uri()
    with tcp_server(tmp_path, "--model", str(tiny_model_dir)) as served:
        a = trusted_client(served, root)
        since = a.mark()
        folders = [{"uri": root.as_uri(), "name": "a"}]
        params = {"processId": None, "capabilities": {}, "workspaceFolders": folders}
        assert "result" in a.request("initialize", params)
        a.wait_log(NOT_READ, since=since)
        a.open(uri, MAIN)  # initialize starts a new set of documents
        assert MARKER not in a.completion_text(uri, *CURSOR)
        a.close()


def test_a_connection_past_the_limit_is_refused_and_the_next_one_served(tmp_path, tiny_model_dir):
    root = project(tmp_path / "a")
    with tcp_server(tmp_path, "--model", str(tiny_model_dir), "--max-sessions", "1") as served:
        a = trusted_client(served, root)
        refused = TcpClient(served)
        refused.wait_closed()
        shown = [m for m in refused.received if m.get("method") == "window/showMessage"]
        assert shown and "1 client" in shown[0]["params"]["message"], refused.received
        assert a.completion_text((root / "app.py").as_uri(), *CURSOR).startswith(MARKER)
        a.close()
        served.wait_log("session ended")
        b = TcpClient(served)
        b.initialize()
        b.wait_log("loaded in")
        b.open(BUFFER_URI, MAIN)  # the same URI as A's buffer: B's own text
        assert MARKER not in b.completion_text(BUFFER_URI, *CURSOR)
        b.close()
