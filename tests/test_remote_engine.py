"""The remote engine against stand-in servers, for what a real vLLM cannot be made to do here.

A real vLLM serving DiffusionGemma is tested in test_vllm.py. A stand-in plays a server here only
where the real one cannot show the case: a plain OpenAI-compatible server without vLLM's diffusion
extras or /tokenize (an older vLLM, SGLang, any other), a 500, an answer that is not JSON, a server
that never answers in time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine import EngineError, InfillRequest, RemoteSettings, load_engine
from engine.remote_http import RemoteError
from tests.lsp_session import inline, lsp_session, open_document

CHAT_ANSWER = {
    "choices": [
        {"message": {"content": "```python\nreturn a + b\n```"}, "finish_reason": "stop"},
        {"message": {"content": "return a+b"}, "finish_reason": "stop"},
    ],
    "usage": {"prompt_tokens": 42},
}


@dataclass
class Behaviour:
    """What the stand-in answers: status and body per path, a delay, and what it saw."""

    answers: dict[str, tuple[int, object]] = field(default_factory=dict)
    delay_s: float = 0.0
    seen: list[tuple[str, dict | None, dict[str, str]]] = field(default_factory=list)
    closed_early: threading.Event = field(default_factory=threading.Event)


def _handler(behaviour: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def log_message(self, *args) -> None:
            pass

        def _answer(self, body: dict | None) -> None:
            behaviour.seen.append((self.path, body, dict(self.headers)))
            status, payload = behaviour.answers.get(self.path, (404, {"detail": "Not Found"}))
            if body is not None and self.path.startswith("/v1/") and behaviour.delay_s:
                time.sleep(behaviour.delay_s)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client went away before the answer
                behaviour.closed_early.set()

        def do_GET(self) -> None:
            self._answer(None)

        def do_POST(self) -> None:
            self._answer(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

    return Handler


@pytest.fixture
def standin() -> Iterator[Callable[..., tuple[str, Behaviour]]]:
    """Start a stand-in with given answers: returns its URL and its behaviour (changeable live)."""
    servers: list[ThreadingHTTPServer] = []

    def start(**answers: tuple[int, object]) -> tuple[str, Behaviour]:
        behaviour = Behaviour({"/v1/models": (200, {"data": [{"id": "some-chat-model"}]})})
        behaviour.answers.update({k.replace("_", "/"): v for k, v in answers.items()})
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(behaviour))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1", behaviour

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_plain_server_gets_a_plain_chat_request_with_only_standard_fields(standin):
    url, seen = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    engine = load_engine(url)
    assert engine.info.family == "gemma4-chat" and "some-chat-model" in engine.info.source
    request = InfillRequest(
        prefix="def add(a, b):\n    ", suffix="\n", language="python", n_candidates=2, max_new_tokens=20,
        drafts=("return a + b",), seed=7, min_new_tokens=1,
    )  # fmt: skip
    result = engine.infill(request)
    assert [c.text for c in result.candidates] == ["return a + b", "return a+b"]  # fences stripped
    assert result.prompt_tokens == 42
    (sent,) = [body for path, body, _ in seen.seen if path == "/v1/chat/completions"]
    assert sent["model"] == "some-chat-model" and sent["max_tokens"] == 20 and sent["n"] == 2
    # No extras for a server that does not take them, and nothing a diffusion model refuses.
    assert not {"vllm_xargs", "temperature", "seed", "min_tokens", "min_p"} & sent.keys()
    content = sent["messages"][0]["content"]
    assert "def add(a, b):\n    <|missing code|>\n" in content and "python" in content


def test_a_server_error_is_one_clear_line_and_the_engine_works_again_after(standin):
    url, behaviour = standin(**{"_v1_chat_completions": (500, {"error": {"message": "CUDA out of memory"}})})
    engine = load_engine(url)
    with pytest.raises(RemoteError, match=r"HTTP 500: CUDA out of memory") as failed:
        engine.infill(InfillRequest(prefix="x = "))
    assert "\n" not in str(failed.value) and url.removesuffix("/v1") in str(failed.value)
    behaviour.answers["/v1/chat/completions"] = (200, CHAT_ANSWER)
    assert engine.infill(InfillRequest(prefix="x = ")).candidates


def test_an_answer_that_is_not_json_is_a_clear_error(standin):
    url, _ = standin(**{"_v1_chat_completions": (200, "<html>Bad gateway</html>")})
    with pytest.raises(RemoteError, match="not JSON"):
        load_engine(url).infill(InfillRequest(prefix="x = "))


def test_an_answer_without_choices_is_a_clear_error(standin):
    url, _ = standin(**{"_v1_chat_completions": (200, {"object": "error"})})
    with pytest.raises(RemoteError, match="no choices"):
        load_engine(url).infill(InfillRequest(prefix="x = "))


def test_a_missed_deadline_returns_nothing_at_once_and_repeated_misses_say_the_server_is_slow(standin):
    url, behaviour = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    engine = load_engine(url)
    behaviour.delay_s = 3.0
    started = time.monotonic()
    result = engine.infill(InfillRequest(prefix="x = ", deadline=time.monotonic() + 0.2))
    assert result.stop_reason == "deadline" and not result.candidates
    assert time.monotonic() - started < 2.0  # a generous guard: the answer would take 3 s
    engine.infill(InfillRequest(prefix="x = ", deadline=time.monotonic() + 0.1))
    with pytest.raises(RemoteError, match="latency budget"):
        engine.infill(InfillRequest(prefix="x = ", deadline=time.monotonic() + 0.1))


def test_a_superseded_request_is_abandoned_at_once_and_its_connection_closed(standin):
    url, behaviour = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    engine = load_engine(url)
    behaviour.delay_s = 3.0
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    result = engine.infill(InfillRequest(prefix="x = ", cancel=cancel))
    assert result.stop_reason == "cancelled" and not result.candidates
    assert time.monotonic() - started < 2.0  # a generous guard: the answer would take 3 s
    assert behaviour.closed_early.wait(timeout=10)  # the stand-in found nobody to answer


def test_the_api_key_is_sent_as_a_bearer_token_and_shown_nowhere(standin, monkeypatch):
    url, behaviour = standin(**{"_v1_chat_completions": (500, {"error": {"message": "boom"}})})
    monkeypatch.setenv("DGEMMA_API_KEY", "from-the-environment")
    engine = load_engine(url, remote=RemoteSettings(api_key="sk-secret-123"))
    with pytest.raises(RemoteError) as failed:
        engine.infill(InfillRequest(prefix="x = "))
    assert {h.get("Authorization") for _, _, h in behaviour.seen} == {"Bearer sk-secret-123"}
    shown = f"{failed.value} {engine.info} {RemoteSettings(api_key='sk-secret-123')}"
    assert "sk-secret-123" not in shown
    load_engine(url)  # without the option: the environment's key
    assert behaviour.seen[-1][2].get("Authorization") == "Bearer from-the-environment"


def test_an_unreachable_server_is_a_clear_error():
    with pytest.raises(EngineError, match=r"remote engine at http://127\.0\.0\.1:9: cannot connect"):
        load_engine("http://127.0.0.1:9/v1")


def test_a_server_that_serves_nothing_is_a_clear_error(standin):
    url, _ = standin(**{"_v1_models": (200, {"data": []})})
    with pytest.raises(EngineError, match="serves no model"):
        load_engine(url)


def test_the_family_can_be_forced(standin):
    url, behaviour = standin(
        **{"_v1_completions": (200, {"choices": [{"text": "1", "finish_reason": "stop"}]})}
    )
    engine = load_engine(url, remote=RemoteSettings(family="fim"))
    assert engine.infill(InfillRequest(prefix="x = ", suffix="\n", language="python")).text == "1"
    sent = behaviour.seen[-1][1]  # after the probe's (a seed canvas this server ignores)
    assert sent["prompt"] == "<|lang:python|><|fim_suffix|>\n<|fim_prefix|>x = <|fim_middle|>"
    with pytest.raises(EngineError, match="not one of"):
        RemoteSettings(family="gpt")


async def test_the_language_server_shows_a_remote_error_once_and_clears_it_when_answers_come_back(standin):
    """A 500 (which a real vLLM cannot be made to answer) through the real language server over stdio."""
    url, behaviour = standin(**{"_v1_chat_completions": (500, {"error": {"message": "overloaded"}})})
    options = {"completion": {"latencyBudgetMs": 0, "syntaxRepair": False}}
    async with lsp_session(url, options=options) as (client, _):
        open_document(client, "file:///work/a.py", "def add(a, b):\n    \n")
        for _ in range(2):
            failed = await inline(client, "file:///work/a.py", 1, 4)
            assert failed is not None and not failed.items
        assert "HTTP 500: overloaded" in (client.statuses[-1].error or "")
        assert client.statuses[-1].state == "ready"
        assert sum("overloaded" in m.message for m in client.messages) == 1  # told once, not per request
        behaviour.answers["/v1/chat/completions"] = (200, CHAT_ANSWER)
        answered = await inline(client, "file:///work/a.py", 1, 4)
        assert answered is not None and answered.items
        assert client.statuses[-1].error is None
