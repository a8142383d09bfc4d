"""The remote engine against stand-in servers, for what a real vLLM cannot be made to do here.

A real vLLM serving DiffusionGemma is tested in test_vllm.py. A stand-in plays a server here only
where the real one cannot show the case: a plain OpenAI-compatible server without vLLM's diffusion
extras or /tokenize (an older vLLM, SGLang, any other), a 500, an answer that is not JSON or too
large, a web server's HTML 404, a server that never answers in time or that accepts and hangs, plain
HTTP where https:// was asked for, a server going away mid-session.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine import CancelFlag, EngineError, InfillRequest, RemoteSettings, load_engine
from engine.remote_http import MAX_BODY_BYTES, RemoteError
from tests.lsp_session import change, inline, lsp_session, open_document, wait_until

CHAT_ANSWER = {
    "choices": [
        {"message": {"content": "```python\nreturn a + b\n```"}, "finish_reason": "stop"},
        {"message": {"content": "return a+b"}, "finish_reason": "stop"},
    ],
    "usage": {"prompt_tokens": 42},
}


@dataclass
class Behaviour:
    """What the stand-in answers: status and body per path, delays, and what it saw."""

    answers: dict[str, tuple[int, object]] = field(default_factory=dict)
    delay_s: float = 0.0  # before answering a POST to /v1/...
    get_delay_s: float = 0.0  # before answering a GET: a server that accepts and hangs
    gone: bool = False  # drop every connection unanswered, as a server going away does
    undeclared: bool = False  # no Content-Length: the body runs to the connection's end
    seen: list[tuple[str, dict | None, dict[str, str]]] = field(default_factory=list)
    closed_early: threading.Event = field(default_factory=threading.Event)


def _handler(behaviour: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def log_message(self, *args) -> None:
            pass

        def _answer(self, body: dict | None) -> None:
            behaviour.seen.append((self.path, body, dict(self.headers)))
            if behaviour.gone:
                self.close_connection = True
                return
            status, payload = behaviour.answers.get(self.path, (404, {"detail": "Not Found"}))
            if body is not None and self.path.startswith("/v1/") and behaviour.delay_s:
                time.sleep(behaviour.delay_s)
            if body is None and behaviour.get_delay_s:
                time.sleep(behaviour.get_delay_s)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            html = isinstance(payload, str) and payload.startswith("<")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if html else "application/json")
                if behaviour.undeclared:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
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


@pytest.mark.parametrize("flag", [CancelFlag, threading.Event], ids=["server's flag", "plain event"])
def test_a_superseded_request_is_abandoned_at_once_and_its_connection_closed(standin, flag):
    url, behaviour = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    engine = load_engine(url)
    behaviour.delay_s = 3.0
    cancel = flag()
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


def _waits_on(thread: int, monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """Each time `thread` goes to sleep on a condition (what any wait in threading comes down to)."""
    seen: list[float | None] = []
    real = threading.Condition.wait

    def wait(self, timeout=None):
        if threading.get_ident() == thread:
            seen.append(timeout)
        return real(self, timeout)

    monkeypatch.setattr(threading.Condition, "wait", wait)
    return seen


def test_waiting_for_an_answer_sleeps_until_it_comes_or_the_request_is_superseded(standin, monkeypatch):
    url, behaviour = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    engine = load_engine(url)
    behaviour.delay_s = 0.5
    waits = _waits_on(threading.get_ident(), monkeypatch)
    assert engine.infill(InfillRequest(prefix="x = ", cancel=CancelFlag())).candidates
    assert len(waits) <= 3  # woken by the answer, not every few milliseconds to look at the flag
    cancel = CancelFlag()
    behaviour.delay_s = 3.0
    threading.Timer(0.3, cancel.set).start()
    waits.clear()
    assert engine.infill(InfillRequest(prefix="x = ", cancel=cancel)).stop_reason == "cancelled"
    assert len(waits) <= 3  # woken by the flag


@pytest.mark.parametrize("declared", [True, False], ids=["Content-Length", "to the connection's end"])
def test_an_answer_past_the_size_cap_is_a_clear_error(standin, declared):
    huge = {**CHAT_ANSWER, "padding": "x" * (MAX_BODY_BYTES + 1)}
    url, behaviour = standin(**{"_v1_chat_completions": (200, huge)})
    engine = load_engine(url)
    behaviour.undeclared = not declared
    with pytest.raises(RemoteError, match=r"answered more than 4 MiB"):
        engine.infill(InfillRequest(prefix="x = "))


def test_a_re_probe_after_an_outage_keeps_to_the_requests_deadline_and_cancel(standin):
    """The server went away, then accepts connections and hangs: the next request's probe of it gives up
    when the request does, not after the 30 s call timeout."""
    url, behaviour = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    engine = load_engine(url)
    behaviour.gone = True
    with pytest.raises(RemoteError, match="cannot connect"):
        engine.infill(InfillRequest(prefix="x = "))
    behaviour.gone, behaviour.get_delay_s = False, 20.0
    started = time.monotonic()
    late = engine.infill(InfillRequest(prefix="x = ", deadline=time.monotonic() + 0.3))
    assert late.stop_reason == "deadline" and time.monotonic() - started < 10  # the hang: 20 s
    cancel = CancelFlag()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    assert engine.infill(InfillRequest(prefix="x = ", cancel=cancel)).stop_reason == "cancelled"
    assert time.monotonic() - started < 10


def test_repeated_misses_say_which_budget_to_set(standin):
    url, behaviour = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    engine = load_engine(url)
    behaviour.delay_s = 0.3
    assert engine.infill(InfillRequest(prefix="x = ")).candidates  # no deadline: answered in ~300 ms
    for _ in range(2):
        engine.infill(InfillRequest(prefix="x = ", deadline=time.monotonic() + 0.1))
    with pytest.raises(RemoteError) as slow:
        engine.infill(InfillRequest(prefix="x = ", deadline=time.monotonic() + 0.1))
    said = str(slow.value)
    assert "set completion.latencyBudgetMs to " in said and "--budget-ms" in said
    suggested = int(said.split("latencyBudgetMs to ")[1].split()[0])
    assert suggested >= 1.25 * 300  # above the slowest answer seen, so it would have been met


def test_a_web_servers_html_404_is_said_in_one_line_without_markup(standin):
    page = "<!DOCTYPE html><html><head><title>404 Not Found</title></head><body>" + "<p>nope</p>" * 40
    url, _ = standin(**{"_v1_models": (404, page + "</body></html>")})
    with pytest.raises(RemoteError) as failed:
        load_engine(url)
    said = str(failed.value)
    assert "HTTP 404" in said and "404 Not Found" in said and "check the URL's path" in said
    assert "<" not in said and "\n" not in said and len(said) < 300


def test_https_to_a_plain_http_port_says_to_use_http(standin):
    url, _ = standin()
    with pytest.raises(RemoteError, match=r"speaks plain HTTP on this port.*use http://"):
        load_engine(url.replace("http://", "https://"))


@pytest.mark.parametrize("path", ["/v1", "/v1/", "/v1/chat/completions", "/v1/completions"])
def test_a_url_naming_the_api_or_one_of_its_endpoints_reaches_the_server(standin, path):
    url, behaviour = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    engine = load_engine(url.removesuffix("/v1") + path)
    assert engine.infill(InfillRequest(prefix="x = ")).candidates
    assert behaviour.seen[0][0] == "/v1/models"  # not .../v1/chat/completions/v1/models


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dgemma_lsp", *args], capture_output=True, text=True,
                          timeout=120, env=env)  # fmt: skip


def test_a_server_address_without_a_scheme_is_one_line_that_says_to_add_it(tmp_path):
    source = tmp_path / "a.py"
    source.write_text("x = 1\n")
    for args in (["complete", str(source), "--line", "1", "--col", "5"], ["doctor"]):
        done = _cli(*args, "--model", "gpu.example.com:8000/v1")
        said = done.stdout + done.stderr
        assert done.returncode == 1 and "add http:// or https://" in said, said
        assert "Traceback" not in said and "HFValidationError" not in said


async def test_a_server_address_without_a_scheme_is_told_once_over_lsp_without_a_traceback():
    async with lsp_session("gpu.example.com:8000/v1", wait_for_model=False) as (client, _):
        await wait_until(lambda: client.messages, what="the load failure")
        assert "add http:// or https://" in client.messages[0].message
        assert not any("Traceback" in m.message for m in [*client.messages, *client.log_messages])


def test_doctor_exits_1_and_says_what_a_server_is_when_it_cannot_be_used(standin, monkeypatch):
    monkeypatch.delenv("DGEMMA_API_KEY", raising=False)
    unreachable = _cli("doctor", "--model", "http://127.0.0.1:9/v1")
    assert unreachable.returncode == 1 and "NOT REACHABLE" in unreachable.stdout
    assert "set DGEMMA_API_KEY" in unreachable.stdout  # the hint stays when the key is unset
    url, _ = standin(**{"_v1_models": (401, {"error": {"message": "Unauthorized"}})})
    refused = _cli("doctor", "--model", url)
    assert (
        refused.returncode == 1
        and "UNAUTHORIZED" in refused.stdout
        and "check DGEMMA_API_KEY" in refused.stdout
    )
    url, _ = standin(**{"_v1_models": (404, "<html><title>Welcome to nginx</title></html>")})
    missing = _cli("doctor", "--model", url)
    assert (
        missing.returncode == 1 and "NOT FOUND" in missing.stdout and "check the URL's path" in missing.stdout
    )
    assert "<" not in missing.stdout.split("model ", 1)[1]


def test_doctor_names_every_diffusion_control_and_a_plain_server_takes_none(standin):
    url, _ = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    done = _cli("doctor", "--model", url)
    assert done.returncode == 0, done.stdout + done.stderr
    for control in ("diffusion_seed_canvas", "diffusion_pinned", "diffusion_max_steps",
                    "diffusion_canvas_length", "diffusion_read_only"):  # fmt: skip
        assert f"{control}" in done.stdout and "checked: taken" not in done.stdout


async def test_the_default_budget_of_a_remote_engine_covers_a_network_round_trip(standin):
    """A server that answers in 300 ms (a GPU server's canvas and a round trip): the editor is shown its
    completion with no budget set."""
    url, behaviour = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    behaviour.delay_s = 0.3
    async with lsp_session(url, options={"completion": {"syntaxRepair": False}}) as (client, _):
        open_document(client, "file:///work/a.py", "def add(a, b):\n    \n")
        answered = await inline(client, "file:///work/a.py", 1, 4)
        assert answered is not None and answered.items


async def test_an_outage_is_logged_once_and_the_status_drops_the_latency_from_before_it(standin):
    url, behaviour = standin(**{"_v1_chat_completions": (200, CHAT_ANSWER)})
    options = {"completion": {"latencyBudgetMs": 0, "syntaxRepair": False}}
    uri = "file:///work/a.py"
    async with lsp_session(url, options=options) as (client, _):
        open_document(client, uri, "def add(a, b):\n    \n")
        assert (await inline(client, uri, 1, 4)).items
        assert client.statuses[-1].lastLatencyMs is not None and client.statuses[-1].lastSource
        behaviour.gone = True
        for version in range(2, 6):  # keystrokes no answer foresaw: never from the cache or reused
            change(client, uri, version, 1, 4 + version - 2, 1, 4 + version - 2, "z")
            gone = await inline(client, uri, 1, 4 + version - 1)
            assert gone is not None and not gone.items
        status = client.statuses[-1]
        assert "cannot connect" in (status.error or "")
        assert status.lastLatencyMs is None and status.lastSource is None
        logged = [m for m in client.log_messages if "cannot connect" in m.message]
        assert len(logged) == 1, [m.message for m in logged]
