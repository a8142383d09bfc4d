"""A raw LSP client over the server's stdio: bytes on the pipe, frames parsed by hand.

pytest-lsp's client builds typed messages and frames them correctly, which is what most tests
want; the fuzzing and soak tests need to write malformed frames, wrong types and exact
`$/cancelRequest` timing, so they drive the real server process through this instead.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SERVER = [sys.executable, "-m", "dgemma_lsp", "--stdio"]
REPO = Path(__file__).resolve().parents[2]


class ServerGone(AssertionError):
    """The server process ended (or closed its output) while a test expected an answer."""


def frame(body: bytes | str) -> bytes:
    data = body.encode() if isinstance(body, str) else body
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


def rss_kb(pid: int) -> int:
    """Resident memory of a process, from /proc (VmRSS, in kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def _key(msg_id: Any) -> Any:
    # A server may echo back an id a fuzzer sent, of any JSON type: key responses by a hashable form.
    return msg_id if isinstance(msg_id, int | str | None) else json.dumps(msg_id, sort_keys=True)


class RawServer:
    def __init__(
        self,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        stderr_path: Path | None = None,
        cwd: Path = REPO,
        command: list[str] | None = None,
    ) -> None:
        self.stderr_path = stderr_path
        self.frames_sent = 0  # every write of a frame or of raw bytes: the fuzzing figures count these
        self._stderr = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [*(command or SERVER), *(args or [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        self.pid = self.process.pid
        self._ids = itertools.count(1)
        self._lock = threading.Condition()
        self.responses: dict[Any, dict] = {}
        self.notifications: list[dict] = []
        self.closed = False  # the server closed stdout
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_loop, name="raw-lsp-reader", daemon=True)
        self._reader.start()

    # --- the wire

    def _read_loop(self) -> None:
        out = self.process.stdout
        assert out is not None
        try:
            while True:
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                if length is None:
                    raise AssertionError("the server sent a frame without Content-Length")
                body = out.read(length)
                if len(body) < length:
                    return
                self._dispatch(json.loads(body))
        finally:
            with self._lock:
                self.closed = True
                self._lock.notify_all()

    def _dispatch(self, message: dict) -> None:
        if "method" in message and "id" in message:
            # A request from the server (progress tokens, configuration): answer so it never waits.
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            return
        with self._lock:
            if "method" in message:
                self.notifications.append(message)
            else:
                self.responses[_key(message.get("id"))] = message
            self._lock.notify_all()

    def write(self, data: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        with self._write_lock:
            try:
                stdin.write(data)
                stdin.flush()
                self.frames_sent += 1
            except BrokenPipeError as err:
                raise ServerGone(f"the server's stdin is closed (exit code {self.process.poll()})") from err

    def send(self, message: dict) -> None:
        self.write(frame(json.dumps(message)))

    # --- requests and notifications

    def next_id(self) -> int:
        return next(self._ids)

    def request_async(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        msg_id = self.next_id() if msg_id is None else msg_id
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    def wait_response(self, msg_id: Any, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        with self._lock:
            while _key(msg_id) not in self.responses:
                if self.closed:
                    raise ServerGone(f"the server closed its output before answering {msg_id!r}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no answer to request {msg_id!r} within {timeout}s")
                self._lock.wait(left)
            return self.responses.pop(_key(msg_id))

    def request(self, method: str, params: Any = None, timeout: float = 30.0) -> dict:
        return self.wait_response(self.request_async(method, params), timeout)

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def wait_notification(
        self,
        predicate: Callable[[dict], bool],
        timeout: float = 60.0,
        what: str = "a notification",
        since: int = 0,
    ) -> dict:
        """The first notification from index `since` on (see `mark`) that satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        seen = since
        with self._lock:
            while True:
                for message in self.notifications[seen:]:
                    if predicate(message):
                        return message
                seen = len(self.notifications)
                if self.closed:
                    raise ServerGone(f"the server closed its output while waiting for {what}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out waiting for {what}")
                self._lock.wait(left)

    def mark(self) -> int:
        """Where the notifications received so far end: pass it as `since` to wait for newer ones."""
        with self._lock:
            return len(self.notifications)

    def messages(self, method: str) -> list[dict]:
        with self._lock:
            return [m for m in self.notifications if m.get("method") == method]

    # --- the LSP session

    def initialize(self, options: dict | None = None, encodings: list[str] | None = None) -> dict:
        capabilities: dict[str, Any] = {"textDocument": {"inlineCompletion": {}, "synchronization": {}}}
        if encodings:
            capabilities["general"] = {"positionEncodings": encodings}
        answer = self.request(
            "initialize",
            {"processId": None, "capabilities": capabilities, "initializationOptions": options or {}},
            timeout=120,
        )
        assert "result" in answer, answer
        self.notify("initialized", {})
        return answer["result"]

    def wait_for_model(self, timeout: float = 120.0, since: int = 0) -> None:
        self.wait_notification(
            lambda m: m.get("method") == "window/logMessage" and "loaded in" in m["params"]["message"],
            timeout,
            "the model to load",
            since,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def rss_kb(self) -> int:
        return rss_kb(self.pid)

    def open(self, uri: str, text: str, language: str = "python", version: int = 1) -> None:
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}},
        )

    def change(self, uri: str, version: int, changes: list[dict]) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes},
        )

    def close_document(self, uri: str) -> None:
        self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def inline_params(self, uri: str, line: int, character: int) -> dict:
        return {
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": 1},
        }

    def stats(self, timeout: float = 30.0, reset: bool = False) -> dict:
        answer = self.request("dgemma/stats", {"reset": True} if reset else None, timeout)
        assert "result" in answer, answer
        return answer["result"]

    def close(self, timeout: float = 30.0) -> int:
        """shutdown + exit; returns the exit code (the process is killed if it does not end)."""
        try:
            if self.alive() and not self.closed:
                self.request("shutdown", None, timeout)
                self.notify("exit")
            return self.process.wait(timeout)
        except (ServerGone, TimeoutError, subprocess.TimeoutExpired):
            self.process.kill()
            return self.process.wait()
        finally:
            if self.process.stdin:
                with contextlib.suppress(BrokenPipeError):  # the server may be gone already
                    self.process.stdin.close()
            if self._stderr is not subprocess.DEVNULL:
                self._stderr.close()
