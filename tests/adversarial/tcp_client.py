"""Raw JSON-RPC clients of `dgemma-lsp --tcp` on real sockets, and the audited server they attack.

pytest-lsp speaks over stdio only; the TCP attacks need two clients at once, bytes sent as written,
and the server's log lines as the events a test waits for. The server runs under the audit hook of
tests/reliability/audited_server.py, so every file it (or a session it forks) opens is in its log.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.reliability.wire import REPO, frame

AUDITED = REPO / "tests" / "reliability" / "audited_server.py"
CLEARED = ("DGEMMA_LSP_TOKEN", "DGEMMA_API_KEY")  # the test decides both


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def connect(port: int, server: subprocess.Popen, timeout: float = 60) -> socket.socket:
    """A connection to the server's port, once it listens (the process must still run meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=timeout)
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def read_message(stream) -> dict | None:
    """The next message on `stream`; None when the server closed the connection."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    assert length is not None, "the server sent a frame without Content-Length"
    body = stream.read(length)
    return json.loads(body) if len(body) == length else None


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Wait for a condition another thread or process makes true (a file, a log line)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class Served:
    """The listening server process, its port, its log and the file its token goes to."""

    process: subprocess.Popen
    port: int
    token_file: Path
    log: Path
    audit: Path

    def token(self) -> str:
        wait_for(lambda: self.token_file.exists() and self.token_file.stat().st_size > 0, "the token file")
        return self.token_file.read_text()

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def wait_log(self, text: str, count: int = 1) -> None:
        """Wait until the server's log file holds `text` `count` times."""
        wait_for(lambda: self.log_text().count(text) >= count, f"{text!r} in the server's log")

    def opened(self) -> set[str]:
        """Every file the server's processes opened (their audit hook's log)."""
        if not self.audit.exists():
            return set()
        events = (json.loads(line) for line in self.audit.read_text().splitlines() if line)
        return {e["path"] for e in events if e["event"] == "open"}

    def stop(self, how: int = signal.SIGTERM) -> int:
        """End the server as a user does (SIGTERM: a service manager; SIGINT: Ctrl-C); its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(how)
        return self.process.wait(timeout=30)


@contextlib.contextmanager
def tcp_server(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[Served]:
    """`dgemma-lsp --tcp` on `port` (a free one) with its runtime folder under `tmp_path`; killed if
    still up at the end."""
    port, runtime = port or free_port(), tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environment |= {"XDG_RUNTIME_DIR": str(runtime), **(env or {})}
    log, audit = tmp_path / "server.log", tmp_path / "audit.log"
    command = [sys.executable, str(AUDITED), str(audit), "--tcp", "--port", str(port), "--log-file", str(log)]
    process = subprocess.Popen(
        [*command, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment, cwd=REPO
    )
    try:
        yield Served(process, port, runtime / "dgemma-lsp" / f"tcp-{port}.token", log, audit)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


class TcpClient:
    """One connection: requests and notifications out, everything the server sends kept in order."""

    def __init__(self, served: Served, first_id: int = 1) -> None:
        self.sock = connect(served.port, served.process)
        self.sock.settimeout(None)
        self._ids = itertools.count(first_id)
        self.sent_ids: set[Any] = set()
        self.responses: dict[Any, dict] = {}
        self.received: list[dict] = []  # every message, responses included
        self.closed = False  # the server closed the connection
        self._lock = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError), self.sock.makefile("rb") as stream:
            while (message := read_message(stream)) is not None:
                if "method" in message and "id" in message:  # a request of the server's: say yes
                    self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                with self._lock:
                    self.received.append(message)
                    if "method" not in message:
                        self.responses[message.get("id")] = message
                    self._lock.notify_all()
        with self._lock:
            self.closed = True
            self._lock.notify_all()

    def _wait(self, ready: Callable[[], Any], what: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        with self._lock:
            while not (found := ready()):
                left = deadline - time.monotonic()
                if self.closed:
                    raise ConnectionError(f"the server closed the connection while waiting for {what}")
                if left <= 0:
                    raise TimeoutError(f"timed out waiting for {what}")
                self._lock.wait(left)
            return found

    # --- the wire

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, message: dict) -> None:
        self.write(frame(json.dumps(message)))

    def request_async(self, method: str, params: Any = None) -> int:
        msg_id = next(self._ids)
        self.sent_ids.add(msg_id)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def wait_response(self, msg_id: Any, timeout: float = 60.0) -> dict:
        return self._wait(lambda: self.responses.get(msg_id), f"the answer to {msg_id!r}", timeout)

    def request(self, method: str, params: Any = None, timeout: float = 60.0) -> dict:
        return self.wait_response(self.request_async(method, params), timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def logs(self) -> list[str]:
        with self._lock:
            return [m["params"]["message"] for m in self.received if m.get("method") == "window/logMessage"]

    def mark(self) -> int:
        """How many log lines came so far: `wait_log(..., since=mark)` waits for a newer one."""
        return len(self.logs())

    def wait_log(self, text: str, since: int = 0, timeout: float = 120.0) -> str:
        """The first log line from the `since`-th on that holds `text`."""

        def found() -> str | None:
            lines = [m["params"]["message"] for m in self.received if m.get("method") == "window/logMessage"]
            return next((line for line in lines[since:] if text in line), None)

        return self._wait(found, f"a log line holding {text!r}", timeout)

    def wait_closed(self, timeout: float = 60.0) -> None:
        self._wait(lambda: self.closed, "the server to close the connection", timeout)

    def foreign_responses(self) -> list[dict]:
        """Responses to requests this client never sent (another client's, sent to the wrong socket)."""
        with self._lock:
            return [r for r in self.responses.values() if r.get("id") not in self.sent_ids | {None}]

    # --- the LSP session

    def initialize(
        self, folders: list[Path] = (), options: dict | None = None, token: str | None = None
    ) -> dict:
        options = dict(options or {}) | ({"tcpToken": token} if token is not None else {})
        params = {
            "processId": None,
            "capabilities": {
                "textDocument": {"inlineCompletion": {}},
                "workspace": {"workspaceFolders": True},
            },
            "workspaceFolders": [{"uri": f.as_uri(), "name": f.name} for f in folders] or None,
            "initializationOptions": options,
        }
        answer = self.request("initialize", params)
        assert "result" in answer, answer
        self.notify("initialized", {})
        return answer["result"]

    def open(self, uri: str, text: str) -> None:
        document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": document})

    def complete(self, uri: str, line: int, character: int) -> dict:
        """The answer to an inline completion request (its result or its error)."""
        params = {
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": 1},
        }
        return self.request("textDocument/inlineCompletion", params)

    def completion_text(self, uri: str, line: int, character: int) -> str:
        """The completion at a cursor once what the repository holds has reached it: the server retrieves
        other files' code on its indexer thread for the next request, so the first request at a new
        cursor reads the open buffers only; the second reads what a leak would let through."""
        self.complete(uri, line, character)
        answer = self.complete(uri, line, character)
        assert "result" in answer, answer
        items = answer["result"]["items"] if isinstance(answer["result"], dict) else answer["result"]
        return items[0]["insertText"] if items else ""

    def close(self) -> None:
        """shutdown and exit, as an editor ends its session; the server then closes the connection."""
        assert "result" in self.request("shutdown")
        self.notify("exit")
        self.wait_closed()
        self.sock.close()

    def drop(self) -> None:
        """Leave without shutdown or exit, as a client that crashed."""
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
