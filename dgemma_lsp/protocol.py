"""pygls' protocol, with two changes.

Requests whose parameters do not fit their LSP type (a negative line, a string for a number) get
a JSON-RPC InvalidParams error naming the problem; pygls on its own logs them and never answers,
which leaves the client waiting forever.

pygls keeps the text of open documents in its workspace and updates it on each didOpen/didChange.
Our `OpenFiles` keeps the text together with an incremental syntax tree, so the built-in copy
would be the same work done twice on every keystroke. These overrides only hand the
notifications to the server's handlers.

`FrameReader` sits between stdin and pygls' reading loop, which on its own desynchronises for good
after one frame without an exact `Content-Length` header and dies on a huge one.
"""

from __future__ import annotations

import logging
import re
from typing import Any, BinaryIO

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol, lsp_method

logger = logging.getLogger(__name__)


class _Answered:
    """A request that failed to parse and has been answered with an error already."""


class DgemmaProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]):
        if "jsonrpc" in data and "method" in data and "params" not in data:
            # JSON-RPC lets a request leave params out; pygls' generic request type requires them.
            data = {**data, "params": None}
        try:
            return super().structure_message(data)
        except JsonRpcException as err:
            if not ("id" in data and "method" in data):
                raise  # a notification or a response: nobody waits for an answer
            cause = err.__cause__
            reason = f"{err.message}: {cause}" if cause is not None else err.message
            if isinstance(err, JsonRpcInvalidParams):
                reason = f"invalid params for {data['method']}: {_first_line(cause) or err.message}"
            self.send_error(data["id"], type(err)(reason))
            return _Answered()

    def handle_message(self, message) -> None:
        if isinstance(message, _Answered):
            return
        if (
            getattr(message, "jsonrpc", None) != self.VERSION
            or not isinstance(getattr(message, "method", ""), str)
            or _answerable(getattr(message, "id", None)) != getattr(message, "id", None)
        ):
            self._refuse(message)
            return
        super().handle_message(message)

    def send_error(self, msg_id: Any, error: JsonRpcException) -> None:
        """An error response; the id is null when it cannot be read, and sent as null (pygls'
        converter would leave it out, and a client would not know the message for a response)."""
        response = {"jsonrpc": self.VERSION, "id": _answerable(msg_id), "error": {"code": error.code}}
        response["error"]["message"] = error.message
        self._send_data(response)

    def _refuse(self, message: Any) -> None:
        """Answer what is not a JSON-RPC 2.0 message (a batch, a scalar, no "jsonrpc") with Invalid
        Request, as JSON-RPC says: pygls drops it silently and a client waits for ever."""
        logger.warning("not a JSON-RPC 2.0 message: %s", type(message).__name__)
        get = message.get if isinstance(message, dict) else lambda key: getattr(message, key, None)
        msg_id = None if isinstance(message, list) else get("id")
        if msg_id is not None and get("method") is None:
            return  # a response of the client's: nothing to answer
        error = JsonRpcInvalidRequest(
            "not a JSON-RPC 2.0 request: LSP sends single objects with jsonrpc 2.0, a string method "
            "and a number or string id"
        )
        self.send_error(msg_id, error)

    def _user_handler(self, method: str, params):
        handler = self.fm.features.get(method)
        if handler is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CLOSE, params)


def _answerable(msg_id: Any) -> int | float | str | None:
    """The id to answer with: JSON-RPC ids are numbers or strings, and null when unreadable."""
    return msg_id if isinstance(msg_id, int | float | str) and not isinstance(msg_id, bool) else None


def _first_line(error: BaseException | None) -> str:
    """cattrs wraps the useful message (which field, which value) in exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error).split("\n", 1)[0] if error is not None else ""


# A header wherever its line starts: after a frame with a wrong length, the next header arrives
# glued to the unread rest of that frame's body. Header names are case-insensitive (HTTP rules).
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\S*)[ \t]*\r?\n\Z", re.IGNORECASE)
_HEADER = re.compile(rb"[A-Za-z][A-Za-z0-9-]*[ \t]*:.*\r?\n\Z")
MAX_FRAME_BYTES = 1 << 30  # a 1 GiB message is a broken header, not a document
_LINE_LIMIT = 1 << 16  # junk is scanned in pieces this size, never held whole


class FrameReader:
    """LSP frames from a byte stream, handed on to pygls' reading loop as well-formed frames.

    pygls matches only the exact line `Content-Length: N` + CRLF, and reads N bytes in one
    allocation: a frame without that header leaves the next header glued to its body, so every
    later message is lost, and a huge N ends the process with MemoryError. This reader finds the
    next header wherever it starts, skips what it cannot read (logging sizes, never content), and
    replaces invalid UTF-8 with U+FFFD as vscode-jsonrpc does. pygls calls `readline` and `read`
    from one executor thread at a time.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lines: list[bytes] = []
        self._body = b""

    def readline(self) -> bytes:
        if not self._lines:
            body = self._next_body()
            if body is None:
                return b""  # end of input
            self._lines, self._body = [b"Content-Length: %d\r\n" % len(body), b"\r\n"], body
        return self._lines.pop(0)

    def read(self, size: int) -> bytes:
        body, self._body = self._body, b""
        return body

    def _next_body(self) -> bytes | None:
        length = self._next_length()
        if length is None:
            return None
        body = self._stream.read(length)
        if len(body) < length:
            return None
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            logger.warning("a message of %d bytes holds invalid UTF-8: replaced with U+FFFD", length)
            body = body.decode("utf-8", "replace").encode("utf-8")
        return body

    def _next_length(self) -> int | None:
        """Read header lines up to the blank line that follows a usable Content-Length."""
        length: int | None = None
        skipped = 0
        carry = b""
        while True:
            piece = self._stream.readline(_LINE_LIMIT)
            if not piece:
                return None
            if not piece.endswith(b"\n"):  # a long run of junk: keep its tail, a header may straddle
                carry = (carry + piece)[-64:]
                skipped += len(piece) - len(carry)
                length = None
                continue
            line, carry = carry + piece, b""
            if not line.strip():
                if length is not None:
                    if skipped:
                        logger.warning("skipped %d bytes that were not a well-formed LSP message", skipped)
                    return length
                continue
            match = _CONTENT_LENGTH.search(line)
            if match is None:
                if not _HEADER.match(line):  # junk: whatever header came before it is void
                    skipped += len(line)
                    length = None
                continue
            skipped += match.start()
            value = match.group(1)
            if value.isdigit() and 0 < int(value) <= MAX_FRAME_BYTES:
                length = int(value)
            else:
                logger.warning("unusable Content-Length %r: message skipped", value[:32].decode("latin-1"))
                length = None
