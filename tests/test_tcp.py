"""`dgemma-lsp --tcp --port N`: the real server process, a client on a TCP socket."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from tests.reliability.wire import frame


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def connect(port: int, server: subprocess.Popen, timeout: float = 60) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=timeout)
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_message(stream) -> dict:
    length = None
    while True:
        line = stream.readline()
        assert line, "the server closed the connection"
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    assert length is not None
    return json.loads(stream.read(length))


def answer(stream, request_id: int) -> dict:
    while True:  # skip notifications and server-to-client requests ($/progress, showMessage)
        message = read_message(stream)
        if message.get("id") == request_id and "method" not in message:
            return message


def test_tcp_server_initializes_answers_and_exits_cleanly(tiny_model_dir):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "dgemma_lsp", "--tcp", "--port", str(port), "--model", str(tiny_model_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with connect(port, server) as sock, sock.makefile("rb") as stream:

            def send(message: dict) -> None:
                sock.sendall(frame(json.dumps({"jsonrpc": "2.0", **message})))

            send(
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": None, "capabilities": {}, "rootUri": None},
                }
            )
            init = answer(stream, 1)
            assert "inlineCompletionProvider" in init["result"]["capabilities"]
            send({"method": "initialized", "params": {}})
            uri = "file:///tcp/example.py"
            text = "def add(a, b):\n    total = a + b\n    out = \n    return out\n"
            send({"method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}}})  # fmt: skip
            items, request_id, deadline = [], 1, time.monotonic() + 60
            while not items:  # empty lists while the model loads, then the completion: never an error
                assert time.monotonic() < deadline, "no completion over TCP within 60 s"
                request_id += 1
                send({"id": request_id, "method": "textDocument/inlineCompletion", "params": {
                    "textDocument": {"uri": uri}, "position": {"line": 2, "character": 10},
                    "context": {"triggerKind": 1}}})  # fmt: skip
                completion = answer(stream, request_id)
                assert "error" not in completion, completion
                result = completion["result"]
                items = result["items"] if isinstance(result, dict) else result
                time.sleep(0.2)
            assert items[0]["insertText"].strip(), items  # the tiny model always writes something here
            send({"id": 100, "method": "shutdown"})
            assert answer(stream, 100)["result"] is None
            send({"method": "exit"})
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
