"""Our dataclasses to lsprotocol types (and plain JSON for custom messages), in the client's encoding."""

from __future__ import annotations

from lsprotocol import types

from dgemma_lsp.documents.positions import PositionEncoding
from dgemma_lsp.documents.text_sync import Document
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.rewrite.targets import Change


def position(document: Document, offset: int, encoding: PositionEncoding) -> types.Position:
    line, character = document.position_at(offset, encoding)
    return types.Position(line=line, character=character)


def inline_completion_list(
    proposals: tuple[Proposal, ...], document: Document, encoding: PositionEncoding
) -> types.InlineCompletionList:
    items = []
    for proposal in proposals:
        at = position(document, proposal.cursor, encoding)
        items.append(
            types.InlineCompletionItem(insert_text=proposal.text, range=types.Range(start=at, end=at))
        )
    return types.InlineCompletionList(items=items)


def range_of(document: Document, start: int, end: int, encoding: PositionEncoding) -> types.Range:
    return types.Range(start=position(document, start, encoding), end=position(document, end, encoding))


def plain(span: types.Range) -> dict:
    """A range as JSON, for custom messages that carry one."""
    return {
        "start": {"line": span.start.line, "character": span.start.character},
        "end": {"line": span.end.line, "character": span.end.character},
    }


def workspace_edit(
    uri: str, version: int, changes: list[Change], document: Document, encoding: PositionEncoding
) -> types.WorkspaceEdit:
    """Versioned, so a client refuses to apply it to a text that has moved on."""
    edits = [
        types.TextEdit(range=range_of(document, c.start, c.end, encoding), new_text=c.text) for c in changes
    ]
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=edits,
            )
        ]
    )
