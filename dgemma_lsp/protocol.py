"""pygls' protocol, with two changes.

Requests whose parameters do not fit their LSP type (a negative line, a string for a number) get
a JSON-RPC InvalidParams error naming the problem; pygls on its own logs them and never answers,
which leaves the client waiting forever.

pygls keeps the text of open documents in its workspace and updates it on each didOpen/didChange.
Our `OpenFiles` keeps the text together with an incremental syntax tree, so the built-in copy
would be the same work done twice on every keystroke. These overrides only hand the
notifications to the server's handlers.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol, lsp_method

logger = logging.getLogger(__name__)


class _Answered:
    """A request that failed to parse and has been answered with an error already."""


class DgemmaProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as err:
            if not ("id" in data and "method" in data):
                raise  # a notification or a response: nobody waits for an answer
            cause = err.__cause__
            reason = f"{err.message}: {cause}" if cause is not None else err.message
            if isinstance(err, JsonRpcInvalidParams):
                reason = f"invalid params for {data['method']}: {_first_line(cause) or err.message}"
            self._send_response(data["id"], error=type(err)(reason).to_response_error())
            return _Answered()

    def handle_message(self, message) -> None:
        if not isinstance(message, _Answered):
            super().handle_message(message)

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


def _first_line(error: BaseException | None) -> str:
    """cattrs wraps the useful message (which field, which value) in exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error).split("\n", 1)[0] if error is not None else ""
