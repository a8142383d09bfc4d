"""The remote engine against a local OpenAI-compatible endpoint.

A stand-in HTTP server plays vLLM here (no GPU server can run on this machine): it checks what the
engine sends and answers the way the OpenAI chat-completions API does.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from engine import EngineError, InfillRequest, load_engine


class OpenAIStandIn(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict]] = []
    delay_s = 0.0

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _send(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send({"data": [{"id": "google/diffusiongemma-26B-A4B-it"}]})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        OpenAIStandIn.seen.append(request)
        time.sleep(OpenAIStandIn.delay_s)
        choices = [
            {"message": {"content": "```python\nreturn a + b\n```"}},
            {"message": {"content": "return a+b"}},
        ]
        self._send({"choices": choices[: request["n"]], "usage": {"prompt_tokens": 42}})


@pytest.fixture
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), OpenAIStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    OpenAIStandIn.seen, OpenAIStandIn.delay_s = [], 0.0
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_a_url_spec_gives_a_remote_engine_that_asks_for_the_middle(endpoint):
    engine = load_engine(endpoint)
    assert engine.info.family == "remote" and "diffusiongemma" in engine.info.source
    result = engine.infill(
        InfillRequest(
            prefix="def add(a, b):\n    ", suffix="\n", language="python", n_candidates=2, max_new_tokens=20
        )
    )
    assert [c.text for c in result.candidates] == ["return a + b", "return a+b"]  # fences stripped
    assert result.prompt_tokens == 42
    sent = OpenAIStandIn.seen[0]
    assert sent["model"] == "google/diffusiongemma-26B-A4B-it" and sent["max_tokens"] == 20 and sent["n"] == 2
    content = sent["messages"][0]["content"]
    assert "def add(a, b):\n    <|missing code|>\n" in content and "python" in content


def test_the_deadline_bounds_the_wait(endpoint):
    engine = load_engine(endpoint)
    OpenAIStandIn.delay_s = 2.0
    started = time.monotonic()
    with pytest.raises(EngineError, match="remote engine"):
        engine.infill(InfillRequest(prefix="x", deadline=time.monotonic() + 0.2))
    assert time.monotonic() - started < 1.5


def test_an_unreachable_server_is_a_clear_error():
    with pytest.raises(EngineError, match=r"remote engine at http://127\.0\.0\.1:9"):
        load_engine("http://127.0.0.1:9/v1")
