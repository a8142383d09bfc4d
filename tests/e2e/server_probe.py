"""Ask the real server what it offers beyond inline completion (block rewrite, next edit).

The rewrite and next-edit tests run only when the server has those features; until then they skip
and say why. A tiny synchronous JSON-RPC client over the server's stdio is enough for that.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

METHOD_NOT_FOUND = -32601


@dataclass(frozen=True)
class ServerFeatures:
    rewrite: bool
    next_edit: bool


class RawClient:
    """A bare JSON-RPC client over a server's stdio that keeps every message the server sent it.

    `timeout`: a failure guard that kills the server, so that a read waiting for ever fails instead.
    """

    def __init__(self, argv: list[str], stderr: IO | int = subprocess.DEVNULL, timeout: float | None = None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        self.next_id = 0
        self.received: list[dict] = []
        self._guard = threading.Timer(timeout, self.proc.kill) if timeout else None
        if self._guard is not None:
            self._guard.start()

    def send(self, method: str, params: object, request: bool = True) -> int | None:
        message: dict = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return message.get("id")

    def read(self) -> dict:
        assert self.proc.stdout is not None
        length = 0
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("the server closed its output")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        message = json.loads(self.proc.stdout.read(length))
        self.received.append(message)
        return message

    def wait_for(self, predicate: Callable[[dict], bool]) -> dict:
        """Read until a message satisfies `predicate` (answering the server's requests meanwhile)."""
        while True:
            message = self.read()
            if "method" in message and "id" in message:  # a request from the server: say yes
                self.send_response(message["id"])
            if predicate(message):
                return message

    def answer(self, request_id: int | None) -> dict:
        """The response to our request `request_id` (the server's own requests get a yes meanwhile)."""
        return self.wait_for(lambda message: message.get("id") == request_id and "method" not in message)

    def send_response(self, request_id: int) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": None}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def close(self) -> None:
        try:
            self.answer(self.send("shutdown", None))
            self.send("exit", None, request=False)
            self.proc.wait(timeout=10)
        except (EOFError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        if self._guard is not None:
            self._guard.cancel()


def probe(server: Path, model: Path) -> ServerFeatures:
    rpc = RawClient([str(server), "--stdio"])
    try:
        init = rpc.answer(
            rpc.send(
                "initialize",
                {
                    "processId": None,
                    "rootUri": None,
                    "initializationOptions": {"model": str(model), "device": "cpu"},
                    "capabilities": {
                        "textDocument": {
                            "inlineCompletion": {},
                            "codeAction": {
                                "codeActionLiteralSupport": {
                                    "codeActionKind": {"valueSet": ["refactor", "refactor.rewrite"]}
                                },
                                "resolveSupport": {"properties": ["edit"]},
                            },
                        }
                    },
                },
            )
        )
        caps = init.get("result", {}).get("capabilities", {})
        provider = caps.get("codeActionProvider")
        kinds = provider.get("codeActionKinds") if isinstance(provider, dict) else None
        rewrite = bool(provider) and (
            kinds is None or any(k in ("refactor", "refactor.rewrite") for k in kinds)
        )
        rpc.send("initialized", {}, request=False)
        uri = "file:///probe.py"
        rpc.send(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}},
            request=False,
        )
        reply = rpc.answer(
            rpc.send(
                "dgemma/nextEdit", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
            )
        )
        next_edit = reply.get("error", {}).get("code") != METHOD_NOT_FOUND
        return ServerFeatures(rewrite=rewrite, next_edit=next_edit)
    finally:
        rpc.close()
