"""A completion offered at a cursor: the message from the pipeline to the server and the editor."""

from __future__ import annotations

from dataclasses import dataclass, field

from dgemma_lsp.inline.evidence import Evidence


@dataclass(frozen=True)
class Proposal:
    text: str  # inserted at the cursor
    cursor: int  # code-point offset in the document it was planned for
    confidence: float  # mean token probability
    # The row it came from: model (fresh noise), a draft's kind (lookup, structure) or next_token.
    origin: str = "model"
    # What the engine said of the text, token by token (what the show-or-not decision reads).
    evidence: Evidence = field(default_factory=Evidence, compare=False)
    typed: int = field(default=0, compare=False)  # characters of it typed through since it was shown
