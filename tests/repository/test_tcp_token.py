"""Over TCP any local user can connect: the server reads a client's workspace folders only when it
presents the token the server wrote where only its user can read it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.wire import frame
from tests.repository.test_server_workspace import AUDITED, HELPERS, opened_files
from tests.test_tcp import answer, connect, free_port


def session(port: int, server: subprocess.Popen, root: Path, options: dict) -> None:
    """Initialize with `root` as the workspace folder, wait long enough for an index to read it, shut down."""
    with connect(port, server) as sock, sock.makefile("rb") as stream:

        def send(message: dict) -> None:
            sock.sendall(frame(json.dumps({"jsonrpc": "2.0", **message})))

        folders = [{"uri": root.as_uri(), "name": root.name}]
        params = {
            "processId": None,
            "capabilities": {},
            "workspaceFolders": folders,
            "initializationOptions": options,
        }
        send({"id": 1, "method": "initialize", "params": params})
        answer(stream, 1)
        send({"method": "initialized", "params": {}})
        time.sleep(3)  # an index of one small folder is done well within this
        send({"id": 2, "method": "shutdown"})
        answer(stream, 2)
        send({"method": "exit"})
    assert server.wait(timeout=30) == 0


@pytest.mark.parametrize("present", [False, True])
def test_a_tcp_client_reads_the_workspace_only_with_the_token(tmp_path, tiny_model_dir, present):
    root = tmp_path / "project"
    root.mkdir()
    (root / "helpers.py").write_text(HELPERS)
    port, log, runtime = free_port(), tmp_path / "opened.log", tmp_path / "runtime"
    environment = {k: v for k, v in os.environ.items() if k != "DGEMMA_LSP_TOKEN"} | {
        "XDG_RUNTIME_DIR": str(runtime)
    }
    command = [
        sys.executable,
        str(AUDITED),
        str(log),
        "--",
        "--tcp",
        "--port",
        str(port),
        "--model",
        str(tiny_model_dir),
    ]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment)
    try:
        token_file = runtime / "dgemma-lsp" / f"tcp-{port}.token"
        deadline = time.monotonic() + 60
        while not token_file.exists():
            assert time.monotonic() < deadline and server.poll() is None, "no token file"
            time.sleep(0.1)
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        options = {"tcpToken": token_file.read_text()} if present else {}
        session(port, server, root, options)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert (str((root / "helpers.py").resolve()) in opened_files(log)) is present
