"""`dgemma-lsp --tcp`: every connection is a session of its own, served by a process of its own.

A session is more than its server object: the handler that forwards log lines to the client sits on
the process's loggers (it would send one client's paths and code to every other), `debugLog` sets
logger levels, the model's thread count and the garbage collector's frozen objects belong to the
process, and LSP `exit` ends a process. So the listener forks a process per connection: the
session's documents, index, trust, options and model live and die with it, a client that drops
leaves nothing for the next, and no session can read or stop another. The listener holds nothing of
any session; it imports no model library and starts no thread, so forking it is safe (macOS too).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import signal
import socket
from collections.abc import Callable
from pathlib import Path

from dgemma_lsp.lsp.tcp_token import TOKEN_ENV, remove_token, serving_token

logger = logging.getLogger(__name__)

MAX_SESSIONS = 4  # each session loads its own model: a bound on what connections can make it hold
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# Serves one connection in its own process (the connection, the token); returns its exit code.
Session = Callable[[socket.socket, str], int]


def serve_tcp(host: str, port: int, max_sessions: int, session: Session) -> int:
    """Listen on host:port until SIGTERM, SIGINT or SIGHUP; then end every session and remove the
    token file."""
    listening = socket.create_server((host, port), backlog=16)
    written: Path | None = None
    try:
        token, written = serving_token(port)  # once the port is ours: the file says a server is here
        where = f"written to {written}" if written else f"from {TOKEN_ENV}"
        logger.warning(
            "serving on %s:%d; clients present initializationOptions.tcpToken (%s) to have their "
            "workspace folders read and to name a model server",
            host, port, where,
        )  # fmt: skip
        with Listener(listening, token, max_sessions, session) as listener:
            listener.run()
    finally:
        remove_token(written)
        listening.close()
    return 0


class Listener:
    """Accepts connections and forks a session for each, up to `max_sessions` at once; one thread,
    woken by the listening socket and by signals (through a pipe, so nothing runs in a handler)."""

    def __init__(self, listening: socket.socket, token: str, max_sessions: int, session: Session) -> None:
        self.listening = listening
        self.token = token
        self.max_sessions = max_sessions
        self.session = session
        self.sessions: dict[int, str] = {}  # process id -> the peer it serves
        self._wake_read, self._wake_write = os.pipe()
        self._selector = selectors.DefaultSelector()

    def __enter__(self) -> Listener:
        for fd in (self._wake_read, self._wake_write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self._wake_write, warn_on_full_buffer=False)
        for number in (signal.SIGCHLD, *STOP_SIGNALS):
            signal.signal(number, _noted)  # the wakeup pipe carries the number to `run`
        self.listening.setblocking(False)
        self._selector.register(self.listening, selectors.EVENT_READ)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        return self

    def __exit__(self, *exc: object) -> None:
        for pid in self.sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in list(self.sessions):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            self.sessions.pop(pid)
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, *STOP_SIGNALS):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self._close_own()

    def _close_own(self) -> None:
        self._selector.close()
        os.close(self._wake_read)
        os.close(self._wake_write)

    def run(self) -> None:
        """Serve until a stop signal."""
        while True:
            for key, _ in self._selector.select():
                if key.fileobj is self.listening:
                    self._accept()
                    continue
                numbers = set(os.read(self._wake_read, 512))
                self._reap()
                if numbers & set(STOP_SIGNALS):
                    logger.info("stopping on signal %s", ", ".join(sorted(str(n) for n in numbers)))
                    return

    def _accept(self) -> None:
        try:
            connection, peer = self.listening.accept()
        except (BlockingIOError, ConnectionAbortedError):
            return  # the peer left before it was accepted
        connection.setblocking(True)
        where = f"{peer[0]}:{peer[1]}"
        if len(self.sessions) >= self.max_sessions:
            self._refuse(connection, where)
        else:
            self._fork(connection, where)

    def _refuse(self, connection: socket.socket, where: str) -> None:
        count = self.max_sessions
        text = (
            f"dgemma-lsp: this server serves {count} client{'' if count == 1 else 's'} at once "
            "(--max-sessions); connect again when one has left"
        )
        logger.warning("refused a connection from %s: %d sessions are served", where, count)
        message = {"jsonrpc": "2.0", "method": "window/showMessage", "params": {"type": 1, "message": text}}
        body = json.dumps(message).encode()
        with connection, contextlib.suppress(OSError):
            connection.settimeout(1.0)
            connection.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            connection.shutdown(socket.SHUT_WR)

    def _fork(self, connection: socket.socket, where: str) -> None:
        try:
            pid = os.fork()
        except OSError as err:  # out of processes or memory: this client waits for a later try
            logger.warning("no session for %s: %s", where, err)
            connection.close()
            return
        if pid == 0:
            self._serve_in_child(connection)  # never returns
        self.sessions[pid] = where
        connection.close()  # the session's process holds it; no later session inherits it
        logger.info("session started: process %d for %s", pid, where)

    def _serve_in_child(self, connection: socket.socket) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                signal.signal(number, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.listening.close()
            self._close_own()
            code = self.session(connection, self.token)
        except BaseException:
            logger.exception("the session failed")
        finally:
            logging.shutdown()
            os._exit(code)  # never back into the listener's frames

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            where = self.sessions.pop(pid, "?")
            code = os.waitstatus_to_exitcode(status)
            logger.info("session ended: process %d for %s, exit code %d", pid, where, code)


def _noted(number: int, frame: object) -> None:
    """A Python-level handler, so that the wakeup pipe receives the signal; `run` acts on it."""
