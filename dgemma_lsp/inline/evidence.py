"""What the engine said of a proposal's text: each token's confidence, and where its row started.

The pipeline cuts and trims model text before it is offered; the evidence is cut with it, so the
show-or-not decision reads the confidences of exactly what is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine import Candidate


@dataclass(frozen=True)
class Evidence:
    confidence: tuple[float, ...] = ()  # each token's probability at the last denoising step
    offsets: tuple[int, ...] = ()  # where each token starts in the proposal's text
    head_confidence: tuple[float, ...] = ()  # the next-token head's, for a row it drafted (else empty)
    draft_kept: bool = False  # the text is the draft its row started from, as the model left it
    lookup_key: int = 0  # characters of the earlier match a lookup draft continued (0: no lookup)
    found_in: str = ""  # where that match was: document, open (another buffer), repository
    lookup_seen: int = 0  # occurrences of that match looked at
    lookup_same_line: float = 0.0  # the share of them that went on with this first line
    lookup_same_word: float = 0.0  # and with this first word
    agreed: int = 0  # characters of the text that every occurrence of that match went on with (0: no head)
    steps: int = 0  # denoising steps the engine ran for it
    deadline_cut: bool = False  # the deadline stopped the canvas before it settled

    def head(self, chars: int) -> Evidence:
        """The evidence of the text's first `chars` characters: the tokens that start before them."""
        kept = sum(1 for offset in self.offsets if offset < chars)
        agreed = self.agreed if self.agreed < chars else 0
        if kept == len(self.offsets) and agreed == self.agreed:
            return self
        return replace(
            self,
            confidence=self.confidence[:kept],
            offsets=self.offsets[:kept],
            head_confidence=self.head_confidence[:kept],
            draft_kept=False,
            agreed=agreed,
        )

    def rest(self, chars: int) -> Evidence:
        """The evidence of the text after its first `chars` characters (typed through meanwhile)."""
        start = sum(1 for offset in self.offsets[1:] if offset <= chars)
        return replace(
            self,
            confidence=self.confidence[start:],
            offsets=tuple(max(0, offset - chars) for offset in self.offsets[start:]),
            head_confidence=self.head_confidence[start:],
            agreed=max(0, self.agreed - chars),
        )


def evidence_of(candidate: Candidate, text: str, steps: int, deadline_cut: bool) -> Evidence:
    """The evidence of `text`, which post-processing made of `candidate`'s text (a head of it, with
    perhaps the closers it opened appended: those have no token and no confidence)."""
    shared = 0
    limit = min(len(text), len(candidate.text))
    while shared < limit and text[shared] == candidate.text[shared]:
        shared += 1
    kept = sum(1 for offset in candidate.offsets if offset < shared)
    return Evidence(
        confidence=candidate.confidence[:kept],
        offsets=candidate.offsets[:kept],
        head_confidence=candidate.head_confidence[:kept],
        steps=steps,
        deadline_cut=deadline_cut,
    )
