"""The server's custom messages (`dgemma/*`), defined once: names, fields and their JSON form.

The editors read the same fields: editors/vscode/src/protocol.ts and editors/nvim/lua/dgemma/lsp.lua
(a test checks that the three agree). A server-to-client notification goes only to a client that
declares it handles it, in its `experimental` capability: `{"experimental": {"dgemma": {"status": true}}}`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

STATUS = "dgemma/status"  # notification, server -> client
NEXT_EDIT = "dgemma/nextEdit"  # request, client -> server
STATS = "dgemma/stats"  # request, client -> server
SUGGESTION = "dgemma/suggestion"  # notification, server -> client: a benchmark's view of the decision
CAPABILITY = "dgemma"  # the key under the client's `experimental` capability
RESOLVING = "dgemma/resolving"  # notification, server -> client: a slow completion's canvas as it settles
CONFIDENCE = "dgemma/confidence"  # notification, server -> client: a completion's unsure parts


@dataclass(frozen=True)
class Indexing:
    """`dgemma/status`'s `indexing`: how far the walk of the workspace folders is."""

    files: int  # indexed so far
    total: int | None = None  # files the walk will read, when it knows (it does not count ahead yet)


@dataclass(frozen=True)
class Status:
    """`dgemma/status` params: what a status bar shows, sent after each model load and completion, and
    while the workspace is indexed."""

    state: str  # none, loading, ready, failed
    model: str | None
    device: str | None
    lastLatencyMs: float | None  # camelCase: the wire names. Of the last answer the model computed
    # model, lookup, structure, next_token (a draft won), typed_through, cache, speculative
    lastSource: str | None
    error: str | None
    indexing: Indexing | None = None  # null when no walk is under way

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SuggestionFacts:
    """`dgemma/suggestion` params, sent before each inline completion's answer to a client that declares
    it (`typing sessions` fit the show-or-not decision on them): every suggestion the decision
    considered at that position, with the facts it read, its probability of being taken, and whether
    it was shown."""

    uri: str
    version: int
    line: int
    character: int
    items: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ResolvingParams:
    """`dgemma/resolving` params: the text so far of the completion that `requestId` (the
    textDocument/inlineCompletion request's id) will answer at `position`, as runs of settled and
    unsettled text ({text, settled}); the engine's raw canvas, before the post-processing of the answer."""

    textDocument: dict[str, str]  # {uri}; camelCase: the wire names
    version: int
    position: dict[str, int]  # {line, character}, as the request gave it
    requestId: int | str
    spans: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ConfidenceParams:
    """`dgemma/confidence` params, sent right before the textDocument/inlineCompletion response
    `requestId` to a client that declares it: for each item of the response that has any, the ranges of
    its insertText the model was unsure of (`low`: [start, end) pairs in the client's position encoding)."""

    textDocument: dict[str, str]
    version: int
    position: dict[str, int]
    requestId: int | str
    items: list[dict[str, Any]]  # {insertText, low: [[start, end], ...]}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NextEditParams:
    """`dgemma/nextEdit` params: `{textDocument: {uri}, position: {line, character}}`."""

    uri: str
    line: int
    character: int

    @classmethod
    def parse(cls, params: object) -> NextEditParams:
        """Checked as lsprotocol would check a typed request; raises ValueError naming the problem."""
        try:
            uri = _field(_field(params, "textDocument"), "uri")
            position = _field(params, "position")
            line, character = _field(position, "line"), _field(position, "character")
        except (AttributeError, KeyError, TypeError) as err:
            raise ValueError(f"{NEXT_EDIT} takes {{textDocument: {{uri}}, position}}: {err}") from err
        if not isinstance(uri, str) or not all(type(v) is int and v >= 0 for v in (line, character)):
            raise ValueError(f"{NEXT_EDIT}: the uri must be a string, line and character integers >= 0")
        return cls(uri, line, character)


@dataclass(frozen=True)
class NextEditResult:
    """`dgemma/nextEdit` result (or null): the edit the user is likely to make next."""

    range: dict[str, Any]  # an LSP Range in the client's position encoding
    newText: str  # the wire name
    confidence: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def client_handles(experimental: object, notification: str) -> bool:
    """Whether a client's `experimental` capability says it handles `notification` (`dgemma/status`:
    `{"dgemma": {"status": true}}`): clients that do not know a custom notification warn about it."""
    name = notification.removeprefix(f"{CAPABILITY}/")
    declared = experimental.get(CAPABILITY) if isinstance(experimental, dict) else None
    return isinstance(declared, dict) and declared.get(name) is True


def wants_reset(params: object) -> bool:
    """`dgemma/stats` params: `{"reset": true}` restarts the figures after reporting them."""
    try:
        return bool(_field(params, "reset"))
    except (AttributeError, KeyError, TypeError):
        return False


def _field(value: object, name: str) -> Any:
    """A field of untyped params: pygls hands them over as named tuples, tests as dicts."""
    return value[name] if isinstance(value, dict) else getattr(value, name)
