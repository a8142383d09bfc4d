"""HTTP for the remote engine: one keep-alive connection pool, calls that can be abandoned at once.

httpx's async client runs on an event loop of its own (one daemon thread per engine), so that the
engine's caller (the model worker) can wait for an answer, its cancel flag or its deadline, whichever
comes first, woken by each (no polling): when the flag or the deadline trips, the call is cancelled on
that loop, its connection is closed, and the server (vLLM aborts a request whose client went away)
stops working on it. Connections are kept alive between calls; an answer is read up to a size cap.
TLS trusts the operating system's certificate store (truststore), so a team server whose certificate
a company CA signed is trusted wherever the machine trusts it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import ssl
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from engine.api import CancelFlag, CancelToken, EngineError

# A cancel token that cannot call back (not a CancelFlag: a plain threading.Event of a script) is
# looked at this often while a call waits; the server's own tokens wake the caller at once.
UNWATCHED_CANCEL_S = 0.05
CONNECT_TIMEOUT_S = 5.0
# A server's error message is shown to the user in one line: long ones are cut.
MAX_MESSAGE_CHARS = 300
# An answer holds a few canvases of tokens with their log-probabilities: kilobytes. More is not one.
MAX_BODY_BYTES = 4 * 1024 * 1024
# What may follow the server's OpenAI API in a URL a user pastes: the base is what comes before.
API_PATHS = ("/chat/completions", "/completions", "/models")

Failure = Literal["unreachable", "timeout", "http", "malformed"]
JSON_HEADERS = {"Content-Type": "application/json"}


class RemoteError(EngineError):
    """The remote server could not be used for this call; the message says where and why, in one line."""

    def __init__(self, message: str, kind: Failure, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class Abandoned(Exception):
    """The caller stopped waiting: its request was superseded or its deadline passed."""

    def __init__(self, reason: Literal["cancelled", "deadline"]) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Call:
    """One HTTP call: GET when `body` is None, else POST of `body` as JSON."""

    path: str
    body: dict[str, Any] | None = None


@dataclass(frozen=True)
class Reply:
    """A server's response, read whole (within MAX_BODY_BYTES)."""

    status: int
    reason: str
    content_type: str
    content: bytes


def server_base(url: str) -> str:
    """The server's root for a model URL: `.../v1`, `.../v1/`, `.../v1/chat/completions`,
    `.../v1/completions` (an endpoint pasted from the server's docs) or the root itself."""
    base = url.strip().rstrip("/")
    for path in API_PATHS:
        if base.endswith("/v1" + path):
            base = base.removesuffix(path)
    return base.removesuffix("/v1")


def system_ssl_context() -> ssl.SSLContext:
    """Certificates as the operating system trusts them (its store, and SSL_CERT_FILE where set)."""
    import truststore

    return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class HttpClient:
    """Calls to one server from any thread; each waits for its answer, its cancel flag or its deadline."""

    def __init__(self, base: str, api_key: str | None = None, timeout_s: float = 30.0) -> None:
        self.base = base
        self.timeout_s = timeout_s
        self.waited_s = 0.0  # time callers spent waiting on the network and the server, all calls
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="dgemma-remote", daemon=True)
        self._thread.start()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            self._client = self._on_loop(self._open(headers)).result()
        except (httpx.InvalidURL, ValueError) as err:
            self._stop()
            raise RemoteError(f"remote engine at {base}: not a usable URL ({err})", "unreachable") from None

    async def _open(self, headers: dict[str, str]) -> httpx.AsyncClient:
        """The client, made on its own loop (its connection pool belongs to that loop)."""
        return httpx.AsyncClient(
            base_url=self.base,
            headers=headers,
            verify=system_ssl_context() if self.base.startswith("https:") else True,
            timeout=httpx.Timeout(self.timeout_s, connect=min(CONNECT_TIMEOUT_S, self.timeout_s)),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=8),
        )  # proxies from the environment (HTTPS_PROXY, NO_PROXY) apply, as they do for pip or curl

    def _on_loop(self, work: Awaitable[Any]) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(work, self._loop)  # type: ignore[arg-type]

    def call(self, call: Call, deadline: float | None = None, cancel: CancelToken | None = None) -> dict:
        """The JSON object the server answers `call` with."""
        return self.calls([call], deadline, cancel)[0]

    def calls(
        self,
        calls: list[Call],
        deadline: float | None = None,
        cancel: CancelToken | None = None,
        errors: bool = False,
    ) -> list[Any]:
        """The answers to `calls`, sent at once on the pool's connections, in their order.

        Raises Abandoned when `cancel` is set or `deadline` (monotonic) passes first (the calls are
        cancelled, their connections closed), and RemoteError when any call fails; with `errors`, a
        failed call's RemoteError takes its place in the answers instead. JSON is written and read on
        the caller's thread: the loop's time is the network's and the server's alone (`waited_s`).
        """
        bodies = [None if c.body is None else json.dumps(c.body).encode() for c in calls]
        started = time.perf_counter()
        try:
            replies = _wait(self._on_loop(self._gather(calls, bodies)), deadline, cancel)
        finally:
            self.waited_s += time.perf_counter() - started
        answers = [self._decoded(call, reply) for call, reply in zip(calls, replies, strict=True)]
        failed = next((a for a in answers if isinstance(a, RemoteError)), None)
        if failed is not None and not errors:
            raise failed
        return answers

    async def _gather(
        self, calls: list[Call], bodies: list[bytes | None]
    ) -> list[httpx.Response | RemoteError]:
        return await asyncio.gather(*(self._send(c, b) for c, b in zip(calls, bodies, strict=True)))

    async def _send(self, call: Call, body: bytes | None) -> Reply | RemoteError:
        """One call on the loop: the server's response, or the RemoteError of a call that got none."""
        where = f"remote engine at {self.base}"
        method, headers = ("GET", None) if body is None else ("POST", JSON_HEADERS)
        try:
            async with self._client.stream(method, call.path, content=body, headers=headers) as response:
                content = await _capped(response)
                reply = Reply(
                    response.status_code,
                    response.reason_phrase,
                    response.headers.get("content-type", ""),
                    content or b"",
                )
        except httpx.TimeoutException:
            return RemoteError(f"{where}: no answer within {self.timeout_s:g} s", "timeout")
        except (httpx.HTTPError, httpx.InvalidURL, OSError) as err:
            return RemoteError(f"{where}: cannot connect ({_connect_reason(err)})", "unreachable")
        if content is None:
            return RemoteError(
                f"{where}: {call.path} answered more than {MAX_BODY_BYTES // 2**20} MiB, "
                "which no answer to this request holds",
                "malformed",
            )
        return reply

    def _decoded(self, call: Call, reply: Reply | RemoteError) -> dict | RemoteError:
        """The JSON object of a response, or the RemoteError that says what is wrong with it."""
        if isinstance(reply, RemoteError):
            return reply
        where = f"remote engine at {self.base}: {call.path}"
        if reply.status >= 400:
            said, route_missing = _error_message(reply)
            hint = _hint(reply.status, route_missing)
            return RemoteError(
                f"{where} answered HTTP {reply.status}: {said}" + (f"; {hint}" if hint else ""),
                "http",
                reply.status,
            )
        try:
            data = json.loads(reply.content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            page = " (an HTML page)" if _is_html(reply) else ""
            return RemoteError(f"{where} answered something that is not JSON{page}", "malformed")
        if not isinstance(data, dict):
            return RemoteError(f"{where} answered JSON that is not an object", "malformed")
        return data

    def close(self) -> None:
        """Close the connections and stop the loop's thread."""
        if self._loop.is_closed():
            return
        self._on_loop(self._client.aclose()).result(timeout=CONNECT_TIMEOUT_S)
        self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=CONNECT_TIMEOUT_S)
        self._loop.close()


def _wait(future: concurrent.futures.Future, deadline: float | None, cancel: CancelToken | None) -> Any:
    """The future's result, unless `cancel` is set or `deadline` passes first (it is cancelled then).

    The caller sleeps until one of the three happens: the future and a CancelFlag wake it, the
    deadline is its timeout. Only a cancel token that cannot call back is looked at now and then."""
    woken = threading.Event()
    future.add_done_callback(lambda _: woken.set())
    unwatch = cancel.add_callback(woken.set) if isinstance(cancel, CancelFlag) else None
    every = UNWATCHED_CANCEL_S if cancel is not None and unwatch is None else None
    try:
        while not future.done():
            if cancel is not None and cancel.is_set():
                future.cancel()
                raise Abandoned("cancelled")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                future.cancel()
                raise Abandoned("deadline")
            woken.wait(left if every is None else every if left is None else min(every, left))
        return future.result()
    finally:
        if unwatch is not None:
            unwatch()


async def _capped(response: httpx.Response) -> bytes | None:
    """The response's body, or None past MAX_BODY_BYTES (read no further: the connection is dropped)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _connect_reason(err: Exception) -> str:
    """Why a connection failed, with what to do where the cause is known."""
    reason = str(err) or type(err).__name__
    if "WRONG_VERSION_NUMBER" in reason or "record layer failure" in reason:
        return "the server speaks plain HTTP on this port, not HTTPS: use http:// in the URL"
    if "CERTIFICATE_VERIFY_FAILED" in reason:
        return f"{reason}; the system does not trust its certificate (SSL_CERT_FILE adds a CA bundle)"
    return reason


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _is_html(reply: Reply) -> bool:
    return "html" in reply.content_type or reply.content.lstrip()[:1] == b"<"


def _error_message(reply: Reply) -> tuple[str, bool]:
    """The server's own words for an error (vLLM's and OpenAI's `error.message`, FastAPI's `detail`),
    in one line, and whether they say the path is not served at all (a 404 of the route, not of a model)."""
    try:
        data = json.loads(reply.content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if data is None and _is_html(reply):  # a web server's or a proxy's page: never its markup
        title = _TITLE.search(reply.content.decode("utf-8", "replace"))
        named = " ".join(title.group(1).split())[:80] if title else ""
        page = f"an HTML page ({named})" if named else "an HTML page"
        return f"{reply.reason or 'error'}, {page}, not an OpenAI-compatible API's answer", True
    message: object = reply.content.decode("utf-8", "replace")
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and "message" in error:
            message = error["message"]
        elif "detail" in data:
            message = data["detail"]
        elif isinstance(error, str):
            message = error
    text = " ".join(str(message).split()) or reply.reason
    route_missing = text.lower() in ("not found", "404 not found", "404 page not found", "")
    return (text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."), route_missing


def _hint(status: int, route_missing: bool) -> str:
    """What to check for an answer that says the request never reached a model."""
    if status == 401:
        return "unauthorized: check DGEMMA_API_KEY (or the remote.apiKey option)"
    if status == 403:
        return "forbidden: check DGEMMA_API_KEY (or the remote.apiKey option)"
    if status == 404 and route_missing:
        return (
            "not found: check the URL's path (it names the server's OpenAI API, such as https://host:8000/v1)"
        )
    return ""
