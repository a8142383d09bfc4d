"""The simulated user of a typing session: which keys they press, where they pause, what they take.

A region of code is typed key by key: one character per key, except that a line break and the
indentation after it are one key (the editor indents after Enter). The typist pauses before every
token that is not whitespace (a run of word characters, or a run of other characters) and looks at
the suggestion shown then. The suggestion is taken whole with Tab when the code goes on with it; else
its correct head, when that is at least MIN_HEAD characters, is taken word by word (one key per word,
as VS Code's accept-word and Neovim's and Emacs' word accepts do); else the typist types on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from dgemma_lsp.inline.lookup import words_of

MIN_HEAD = 4  # a shorter correct head is quicker typed than taken word by word
_TOKEN = re.compile(r"\n[ \t]*|[ \t]+|\w+|[^\w\s]+")

Verdict = Literal["whole", "partial", "wrong"]


@dataclass(frozen=True)
class Key:
    """One key press: the text it inserts, and whether the typist pauses before pressing it."""

    text: str
    pause: bool


@dataclass(frozen=True)
class Taken:
    """What the typist did with a suggestion: took it whole, took its head, or typed on."""

    verdict: Verdict
    chars: int  # characters of the suggestion inserted
    keys: int  # keys pressed to insert them (Tab, or one per word)


def keys_of(region: str) -> list[Key]:
    """The keys that type `region`, with the pauses before its tokens."""
    keys: list[Key] = []
    for match in _TOKEN.finditer(region):
        token = match.group(0)
        if token.startswith("\n"):
            keys.append(Key(token, pause=False))
            continue
        pause = not token[0].isspace()
        keys.extend(Key(char, pause=pause and i == 0) for i, char in enumerate(token))
    return keys


def keys_to_type(text: str) -> int:
    """Keys that type `text` by hand (a line break and its indentation are one)."""
    return len(keys_of(text))


def word_steps(suggestion: str) -> list[str]:
    """The suggestion as accept-word keys take it, one piece per key (what precedes the next word or run
    of punctuation, and it): the server's lookup counts agreement in the same pieces."""
    return words_of(suggestion)


def judge(suggestion: str, truth: str) -> Taken:
    """What the typist takes of `suggestion` when the code goes on with `truth`."""
    if suggestion and truth.startswith(suggestion):
        return Taken("whole", len(suggestion), 1)
    head = steps = 0
    for step in word_steps(suggestion):
        if not truth.startswith(suggestion[: head + len(step)]):
            break
        head += len(step)
        steps += 1
    if head >= MIN_HEAD:
        return Taken("partial", head, steps)
    return Taken("wrong", 0, 0)
