"""The server's own log lines, sent to the client as `window/logMessage` at the level it asked for.

stderr (set up by the CLI) carries warnings and errors only: editors file stderr under their own
error level (Neovim's lsp.log writes every stderr line as [ERROR]). The details go to the client's log:
errors, warnings and info lines, and debug lines too when the client's trace is `verbose`
(`InitializeParams.trace`, `$/setTrace`). Only the loggers of `dgemma_lsp` and `engine` are sent: pygls'
own lines carry whole messages, document text included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from lsprotocol import types

LOGGERS = ("dgemma_lsp", "engine")

_TYPES = (
    (logging.ERROR, types.MessageType.Error),
    (logging.WARNING, types.MessageType.Warning),
    (logging.INFO, types.MessageType.Info),
)
_LEVELS = {
    types.MessageType.Error: logging.ERROR,
    types.MessageType.Warning: logging.WARNING,
    types.MessageType.Info: logging.INFO,
    types.MessageType.Log: logging.DEBUG,
    types.MessageType.Debug: logging.DEBUG,
}

Send = Callable[[types.MessageType, str], None]


def message_type(level: int) -> types.MessageType:
    """The LSP message type of a Python log level (below INFO: Log, which every client knows)."""
    return next((kind for floor, kind in _TYPES if level >= floor), types.MessageType.Log)


def python_level(kind: types.MessageType) -> int:
    """The Python log level of an LSP message type."""
    return _LEVELS.get(kind, logging.INFO)


def level_for_trace(trace: types.TraceValue | str | None) -> int:
    """What the client's log gets: debug lines with trace `verbose`, else info and above."""
    return logging.DEBUG if trace == types.TraceValue.Verbose else logging.INFO


class ClientLog(logging.Handler):
    """Hands log records to `send` on the event loop's thread (records come from the model worker too)."""

    def __init__(self, send: Send, loop: asyncio.AbstractEventLoop, level: int) -> None:
        super().__init__(level)
        self.send = send
        self.loop = loop
        self.loop_thread = threading.get_ident()  # made on the loop's thread (in `initialize`)
        self.setFormatter(logging.Formatter("%(message)s"))
        self._sending = threading.local()  # a record logged while one is sent is not sent again

    def emit(self, record: logging.LogRecord) -> None:
        """Send `record` (formatted, with its traceback) to the client; never raises."""
        if getattr(self._sending, "active", False):
            return
        try:
            text = self.format(record)
        except Exception:  # a bad format string must not break the caller
            return
        if threading.get_ident() == self.loop_thread:
            self._send(record, text)
        elif not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self.loop.call_soon_threadsafe(self._send, record, text)

    def _send(self, record: logging.LogRecord, text: str) -> None:
        self._sending.active = True
        try:
            self.send(message_type(record.levelno), text)
        except Exception:  # the log must not take the server down: logging reports it on stderr
            self.handleError(record)
        finally:
            self._sending.active = False

    def attach(self) -> None:
        """Listen to the server's loggers, which must pass records down to this handler's level."""
        for name in LOGGERS:
            logger = logging.getLogger(name)
            if self not in logger.handlers:
                logger.addHandler(self)
        self.follow(self.level)

    def follow(self, level: int) -> None:
        """Send records from `level` up; the loggers keep what stderr asked for below it (-v)."""
        self.setLevel(level)
        floor = min(level, logging.getLogger().getEffectiveLevel())
        for name in LOGGERS:
            logging.getLogger(name).setLevel(floor)

    def detach(self) -> None:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(self)
