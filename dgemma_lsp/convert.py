"""Our dataclasses to lsprotocol types, in the client's position encoding."""

from __future__ import annotations

from lsprotocol import types

from dgemma_lsp.completion import Proposal
from dgemma_lsp.documents import Document
from dgemma_lsp.positions import PositionEncoding


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
