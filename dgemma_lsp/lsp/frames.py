"""LSP frames read robustly from stdin or a TCP connection, for pygls' reading loop.

pygls matches only the exact line `Content-Length: N` + CRLF and reads N bytes in one allocation:
one frame without that header desynchronises it for good, and a huge N kills the process.
"""

from __future__ import annotations

import logging
import re
from typing import BinaryIO

logger = logging.getLogger(__name__)

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
