"""Tokenizing text line by line with a memo of each line's ids, so a keystroke tokenizes one line again.

Every request tokenizes its windows twice (once to size them, once for the prompt), and the text
differs from the previous keystroke's in one line. Cutting the text before each line break and
encoding the pieces separately gives exactly the ids of the whole text when no pre-tokenizer piece
can hold a line break together with what precedes it: true of the pre-tokenizer our own models ship
(a run of line breaks starts a piece of its own, and no other piece takes a line break). Whether a
tokenizer has that pre-tokenizer is read from its description once; any other encodes whole texts.
"""

from __future__ import annotations

import json
import re

from tokenizers import Tokenizer

# The pre-tokenizer of our own models' BPE (`training.tokenizer` builds it): a run of line breaks
# keeps the next line's indentation in the same piece, so BPE learns tokens like "\n        ".
PRE_TOKENIZER_PATTERN = (
    r"(?:\r?\n)+[ \t]*"
    r"|[ \t]+(?=\r?\n)"
    r"|[^\r\n\p{L}\p{N}]?\p{L}+"
    r"| ?\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+"
    r"|[ \t]+(?!\S)"
    r"|[ \t]+"
)
# Before each run of line breaks (a line break not preceded by one).
_LINE_CUT = re.compile(r"(?<![\r\n])(?=\r?\n)")
MEMO_LINES = 32_768  # lines remembered; the memo starts afresh when full


def splits_at_line_breaks(tokenizer: Tokenizer) -> bool:
    """True when encoding a text equals encoding its pieces cut before each line-break run."""
    described = json.loads(tokenizer.to_str())
    if described.get("normalizer") is not None:
        return False
    pre = described.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    if len(steps) != 2:
        return False
    split, byte_level = steps
    return (
        split.get("type") == "Split"
        and split.get("pattern") == {"Regex": PRE_TOKENIZER_PATTERN}
        and split.get("behavior") == "Isolated"
        and not split.get("invert")
        and byte_level.get("type") == "ByteLevel"
        and byte_level.get("use_regex") is False
    )


class LineMemoEncoder:
    """`encode(text)` with each line's ids remembered (exact: see the module docstring).

    Used from the event loop (window sizing) and the engine's worker (the prompt) at once: the memo
    is a plain dict, whose single operations are atomic, and losing an entry only costs an encode.
    """

    def __init__(self, tokenizer: Tokenizer, capacity: int = MEMO_LINES) -> None:
        self.tokenizer = tokenizer
        self.capacity = capacity
        self.by_line = splits_at_line_breaks(tokenizer)
        self.memo: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        if not self.by_line:
            return self.tokenizer.encode(text, add_special_tokens=False).ids
        pieces = _LINE_CUT.split(text)
        memo = self.memo
        missing = [piece for piece in dict.fromkeys(pieces) if piece not in memo]
        fresh: dict[str, list[int]] = {}
        if missing:
            if len(memo) + len(missing) > self.capacity:
                memo.clear()
            encoded = self.tokenizer.encode_batch(missing, add_special_tokens=False)
            fresh = {piece: found.ids for piece, found in zip(missing, encoded, strict=True)}
            for piece in missing[-self.capacity :]:  # more new lines than it holds: it keeps the last
                memo[piece] = fresh[piece]
        ids: list[int] = []
        for piece in pieces:
            found = fresh.get(piece)
            if found is None:
                found = memo.get(piece)
            if found is None:  # cleared by the other thread between the two loops
                found = self.tokenizer.encode(piece, add_special_tokens=False).ids
            ids.extend(found)
        return ids
