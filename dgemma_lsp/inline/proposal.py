"""A completion offered at a cursor: the message from the pipeline to the server and the editor."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Proposal:
    text: str  # inserted at the cursor
    cursor: int  # code-point offset in the document it was planned for
    confidence: float  # mean token probability
    origin: str = "model"  # the row it came from: model (fresh noise), or a draft's kind (lookup, structure)
