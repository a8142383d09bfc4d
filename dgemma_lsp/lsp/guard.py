"""pygls' protocol, with two changes.

Requests whose parameters do not fit their LSP type (a negative line, a string for a number) get
a JSON-RPC InvalidParams error naming the problem; pygls on its own logs them and never answers,
which leaves the client waiting forever.

pygls keeps the text of open documents in its workspace and updates it on each didOpen/didChange.
Our `Workspace` keeps the text together with an incremental syntax tree, so the built-in copy
would be the same work done twice on every keystroke. These overrides only hand the
notifications to the server's handlers.
"""

from __future__ import annotations

import logging
from typing import Any

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
