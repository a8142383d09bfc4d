"""Code repeats itself: what followed the longest earlier match of the text before the cursor.

Pure string work, cheap enough for every keystroke: the longest suffix of the text before the
cursor that occurs elsewhere (a binary search on its length, each probe one `str.find`), then what
followed each occurrence, up to a line or a number of lines. The trainer makes its draft canvases
with the same function, so the model learns what such drafts are worth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_KEY = 6  # characters: shorter keys ("x = ", "if ") repeat by chance
MAX_KEY = 256
MAX_OCCURRENCES = 16  # looked at, in all haystacks, nearest first
_STEP = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")  # a word with the space before it, as accept-word takes it


@dataclass(frozen=True)
class Haystack:
    """A text to search, with a range to skip (the cursor's own occurrence in its document)."""

    text: str
    skip_start: int = 0
    skip_end: int = 0

    def find_all(self, needle: str, limit: int) -> list[int]:
        """Where `needle` starts outside the skipped range, nearest to the skipped range first."""
        before, after = [], []
        end = self.skip_start
        while len(before) < limit and (at := self.text.rfind(needle, 0, end)) >= 0:
            if at + len(needle) <= self.skip_start:
                before.append(at)
            end = at + len(needle) - 1
        at = self.text.find(needle, self.skip_end)
        while len(after) < limit and at >= 0:
            after.append(at)
            at = self.text.find(needle, at + 1)
        return (before + after)[:limit]

    def contains(self, needle: str) -> bool:
        return bool(self.find_all(needle, 1))


def longest_key(before: str, haystacks: list[Haystack]) -> str:
    """The longest suffix of `before` (MIN_KEY..MAX_KEY characters) found in a haystack, or ""."""
    low, high = MIN_KEY, min(len(before), MAX_KEY)
    best = ""
    while low <= high:
        size = (low + high) // 2
        key = before[len(before) - size :]
        if key.strip() and any(h.contains(key) for h in haystacks):
            best, low = key, size + 1
        else:
            high = size - 1
    return best


def continuation(text: str, start: int, lines: int) -> str:
    """`text` from `start` to the end of its line, and then `lines - 1` more lines."""
    end = start
    for _ in range(lines):
        end = text.find("\n", end)
        if end < 0:
            return text[start:]
        end += 1
    return text[start : end - 1]


def continuations(before: str, haystacks: list[Haystack], lines: int, limit: int) -> list[str]:
    """What followed the longest earlier match of `before`, distinct, nearest first (at most `limit`)."""
    return [text for text, _ in found_continuations(before, haystacks, lines, limit).found]


@dataclass(frozen=True)
class Found:
    """The longest earlier match of the text before the cursor, and what followed its occurrences."""

    key: str
    found: list[tuple[str, int]]  # distinct continuations, nearest first, each with its haystack's index
    occurrences: int = 0  # occurrences of the key looked at (at most MAX_OCCURRENCES in all)
    same_line: int = 0  # of them, those whose continuation's first line is the first one's
    same_word: int = 0  # those whose continuation starts with the first one's first word
    agreed: int = -1  # words of the first continuation that every other goes on with (-1: no other)


def found_continuations(before: str, haystacks: list[Haystack], lines: int, limit: int) -> Found:
    """The longest earlier match of `before` (the key), what followed it (distinct, nearest first, at
    most `limit`), and how far its other occurrences agree with the nearest: whether the code that
    repeats itself here repeats one way or several."""
    key = longest_key(before, haystacks)
    if not key:
        return Found("", [])
    found: list[tuple[str, int]] = []
    occurrences = same_line = same_word = 0
    first_line = first_word = ""
    steps: list[str] = []
    agreed = -1
    for index, haystack in enumerate(haystacks):
        for at in haystack.find_all(key, MAX_OCCURRENCES - occurrences):
            text = continuation(haystack.text, at + len(key), lines)
            if not text.strip():
                continue
            line, word = _first_line_and_word(text)
            if not occurrences:
                first_line, first_word = line, word
                steps = words_of(text)
            else:
                agreed = min(len(steps) if agreed < 0 else agreed, shared_words(steps, text))
            occurrences += 1
            same_line += line == first_line
            same_word += word == first_word
            if len(found) < limit and all(text != seen for seen, _ in found):
                found.append((text, index))
        if occurrences >= MAX_OCCURRENCES:
            break
    return Found(key, found, occurrences, same_line, same_word, agreed)


def words_of(text: str) -> list[str]:
    """`text` as accept-word keys take it, one piece per word (its leading space with it)."""
    return _STEP.findall(text)


def shared_words(words: list[str], text: str) -> int:
    """How many of `words` (in order) `text` begins with."""
    at = 0
    for count, word in enumerate(words):
        if not text.startswith(word, at):
            return count
        at += len(word)
    return len(words)


def agreed_head(text: str, words: int) -> str:
    """The first `words` words of `text` (words_of), without trailing space."""
    return "".join(words_of(text)[:words]).rstrip()


def _first_line_and_word(text: str) -> tuple[str, str]:
    line = text.split("\n", 1)[0].strip() or text.strip().split("\n", 1)[0]
    return line, words_of(line)[0] if line else ""


def cut_before_suffix(draft: str, line_suffix: str, next_line: str) -> str:
    """A draft stops where it would write again what follows the cursor."""
    rest = line_suffix.strip()
    if rest and (at := draft.find(rest)) >= 0:
        draft = draft[:at]
    following = next_line.strip()
    if following and "\n" in draft:
        kept = []
        for line in draft.split("\n"):
            if kept and line.strip() == following:
                break
            kept.append(line)
        draft = "\n".join(kept)
    return draft.rstrip() if "\n" in draft else draft
