"""HTTP for the remote engine: one keep-alive connection pool, calls that can be abandoned at once.

httpx's async client runs on an event loop of its own (one daemon thread per engine), so that the
engine's caller (the model worker) can wait for an answer while watching its cancel flag and its
deadline: when either trips, the call is cancelled on that loop, its connection is closed, and the
server (vLLM aborts a request whose client went away) stops working on it. Connections are kept
alive between calls. TLS trusts the operating system's certificate store (truststore), so a team
server whose certificate a company CA signed is trusted wherever the machine trusts it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import ssl
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from engine.api import CancelToken, EngineError

# How often a waiting caller looks at its cancel flag: a superseded request is abandoned within this.
POLL_S = 0.002
CONNECT_TIMEOUT_S = 5.0
# A server's error message is shown to the user in one line: long ones are cut.
MAX_MESSAGE_CHARS = 300

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


def server_base(url: str) -> str:
    """The server's root for a model URL, which may name its OpenAI API (`.../v1`) or not."""
    return url.rstrip("/").removesuffix("/v1")


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
        self.round_trips = 0  # batches of calls sent at once
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
            replies = self._wait(self._on_loop(self._gather(calls, bodies)), deadline, cancel)
        finally:
            self.waited_s += time.perf_counter() - started
            self.round_trips += 1
        answers = [self._decoded(call, reply) for call, reply in zip(calls, replies, strict=True)]
        failed = next((a for a in answers if isinstance(a, RemoteError)), None)
        if failed is not None and not errors:
            raise failed
        return answers

    @staticmethod
    def _wait(future: concurrent.futures.Future, deadline: float | None, cancel: CancelToken | None) -> Any:
        """The future's result, unless `cancel` is set or `deadline` passes first (it is cancelled)."""
        while True:
            wait = POLL_S if deadline is None else min(POLL_S, max(0.0, deadline - time.monotonic()))
            try:
                return future.result(timeout=wait)
            except TimeoutError:
                if cancel is not None and cancel.is_set():
                    future.cancel()
                    raise Abandoned("cancelled") from None
                if deadline is not None and time.monotonic() >= deadline:
                    future.cancel()
                    raise Abandoned("deadline") from None

    async def _gather(
        self, calls: list[Call], bodies: list[bytes | None]
    ) -> list[httpx.Response | RemoteError]:
        return await asyncio.gather(*(self._send(c, b) for c, b in zip(calls, bodies, strict=True)))

    async def _send(self, call: Call, body: bytes | None) -> httpx.Response | RemoteError:
        """One call on the loop: the server's response, or the RemoteError of a call that got none."""
        where = f"remote engine at {self.base}"
        try:
            if body is None:
                return await self._client.get(call.path)
            return await self._client.post(call.path, content=body, headers=JSON_HEADERS)
        except httpx.TimeoutException:
            return RemoteError(f"{where}: no answer within {self.timeout_s:g} s", "timeout")
        except (httpx.HTTPError, httpx.InvalidURL, OSError) as err:
            reason = str(err) or type(err).__name__
            return RemoteError(f"{where}: cannot connect ({reason})", "unreachable")

    def _decoded(self, call: Call, reply: httpx.Response | RemoteError) -> dict | RemoteError:
        """The JSON object of a response, or the RemoteError that says what is wrong with it."""
        if isinstance(reply, RemoteError):
            return reply
        where = f"remote engine at {self.base}: {call.path}"
        if reply.status_code >= 400:
            return RemoteError(
                f"{where} answered HTTP {reply.status_code}: {_error_message(reply)}",
                "http",
                reply.status_code,
            )
        try:
            data = json.loads(reply.content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return RemoteError(f"{where} answered something that is not JSON", "malformed")
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


def _error_message(response: httpx.Response) -> str:
    """The server's own words for an error (vLLM's and OpenAI's `error.message`, FastAPI's `detail`)."""
    try:
        data = response.json()
    except ValueError:
        data = None
    message: object = response.text
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and "message" in error:
            message = error["message"]
        elif "detail" in data:
            message = data["detail"]
        elif isinstance(error, str):
            message = error
    text = " ".join(str(message).split()) or response.reason_phrase
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."
