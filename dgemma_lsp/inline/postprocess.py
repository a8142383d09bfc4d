"""What happens to model text before it is offered: pure functions on strings.

In order: keep to the scope (one line, or the lines of the enclosing block), drop what only writes the
line above again, cut before a line that repeats the one before it, drop what went round a loop, cut
what repeats the start of the suffix,
end with the line that closes the brackets open at the cursor, close only the brackets the
completion itself opened, cut a last word that would run into the word after the cursor, and drop
results with nothing in them. Each step is a small function so
each can be tested alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_QUOTES = "\"'`"


@dataclass(frozen=True)
class Shape:
    """What the context says a completion at this cursor may look like."""

    multi_line: bool
    max_lines: int
    # A non-empty completion line indented less than this ends the completion (it left the block).
    min_indent: int | None
    line_suffix: str  # the rest of the cursor's line
    suffix: str  # everything after the cursor (the window the model saw)
    line_prefix: str = ""  # the cursor's line before the cursor
    # Brackets open at the cursor that the completion is there to close: it ends with the line that
    # closes them (0: no such statement to finish).
    open_brackets: int = 0
    line_above: str = ""  # the line before the cursor's


def keep_to_scope(text: str, shape: Shape) -> str:
    if not shape.multi_line:
        return text.split("\n", 1)[0]
    lines = text.split("\n")
    kept = [lines[0]]
    for line in lines[1:]:
        if len(kept) >= shape.max_lines:
            break
        stripped = line.lstrip(" \t")
        if stripped and shape.min_indent is not None and len(line) - len(stripped) < shape.min_indent:
            break
        kept.append(line)
    return "\n".join(kept).rstrip(" \t\n") if len(kept) > 1 else kept[0]


_SUFFIX_HEAD = 4  # characters other than spaces that make a head of the line's rest no chance match


def cut_suffix_repeat(text: str, shape: Shape) -> str:
    """Remove a tail of the completion that the code after the cursor already has."""
    rest = shape.line_suffix.strip()
    # The model often writes on into the code that follows; stop before it. On a blank line its first
    # line counts too: writing the line below again is no completion.
    if not shape.multi_line:
        if not shape.line_prefix.strip() and not rest:  # a blank line: nothing of it to cut against
            following = _first_code_line(shape.suffix)
            return "" if len(following) > 2 and text.strip() == following else text
        if _meaningful(rest) and text.rstrip().endswith(rest):
            return text.rstrip()[: -len(rest)]
        text = _cut_overlap(_cut_at_suffix_head(text, shape.line_suffix), shape.line_suffix.lstrip())
        return _cut_shared_ending(text, rest)
    following = _first_code_line(shape.suffix)
    if len(following) > 2:
        lines = text.split("\n")
        for i in range(0 if not shape.line_prefix.strip() else 1, len(lines)):
            if lines[i].strip() == following:
                return "\n".join(lines[:i]).rstrip(" \t\n")
    return _cut_overlap(text, shape.suffix.lstrip(" \t"))


def _first_code_line(suffix: str) -> str:
    """The first line of `suffix` with something in it, stripped ("" for none); read lazily, as the
    suffix window may hold many lines."""
    return next((stripped for line in suffix.split("\n") if (stripped := line.strip())), "")


def _cut_at_suffix_head(text: str, line_suffix: str) -> str:
    """Cut a one-line completion where it starts writing the rest of the line (four or more of its
    characters that are not spaces, as the line has them), whatever it wrote after that."""
    for size in range(min(len(line_suffix), len(text) - 1), 0, -1):  # a longer head cannot be in it
        head = line_suffix[:size]
        if len(head) - head.count(" ") < _SUFFIX_HEAD:
            break
        if (at := text.find(head, 1)) > 0:
            return text[:at]
    return text


def _cut_shared_ending(text: str, rest: str) -> str:
    """Cut the closers and separators a one-line completion ends with when the line's rest ends with the
    same ones: `if token.valid:` written before ` is not None:` ends its statement twice."""
    size = 0
    while (
        size < min(len(text), len(rest))
        and text[-1 - size] == rest[-1 - size]
        and (text[-1 - size] in _CLOSE or text[-1 - size] in ";,:")
    ):
        size += 1
    return text[: len(text) - size] if size and text[: len(text) - size].strip() else text


def _meaningful(overlap: str) -> bool:
    # A shared letter or two is as likely chance as repetition; closing brackets and separators are not.
    stripped = overlap.strip()
    return len(stripped) >= 3 or (bool(stripped) and all(c in _CLOSE or c in ";,:" for c in stripped))


def _cut_overlap(text: str, suffix: str) -> str:
    """Remove the longest tail of `text` that is a head of `suffix`, if it is meaningful."""
    for size in range(min(len(text), len(suffix)), 0, -1):
        if text.endswith(suffix[:size]) and _meaningful(suffix[:size]):
            return text[: len(text) - size]
    return text


def finish_statement(text: str, shape: Shape) -> str:
    """End a completion that closes the brackets open at the cursor with the line that closes them:
    the statement is finished there, and what follows it is a new one the user has not asked for."""
    depth = shape.open_brackets
    if not depth or not shape.multi_line:
        return text
    for index, char in _code_chars(text):
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
            if depth == 0:
                end = text.find("\n", index)
                return text if end < 0 else text[:end]
    return text


def _code_chars(text: str) -> Iterator[tuple[int, str]]:
    """Each character of `text` outside string literals (which end at a line break), with its index."""
    quote: str | None = None
    for i, char in enumerate(text):
        if quote:
            if (char == quote and text[i - 1] != "\\") or char == "\n":
                quote = None
            continue
        if char in _QUOTES:
            quote = char
        else:
            yield i, char


def open_brackets(text: str) -> int:
    """Brackets `text` opens and does not close, string literals left out (negative: it closes more)."""
    return sum(1 if c in _OPEN else -1 if c in _CLOSE else 0 for _, c in _code_chars(text))


def balance_brackets(text: str, shape: Shape) -> str:
    """Cut where the completion closes a bracket the suffix closes already; close what it opened itself
    and the rest of the line does not close, unless it ends by opening one."""
    stack: list[str] = []
    for i, char in _code_chars(text):
        if char in _OPEN:
            stack.append(char)
        elif char in _CLOSE:
            if stack and stack[-1] == _CLOSE[char]:
                stack.pop()
            elif shape.line_suffix.lstrip().startswith(char):
                return text[:i].rstrip(" \t") if not shape.multi_line else text[:i]
    if stack and not shape.multi_line and not text.rstrip().endswith(tuple(_OPEN)):
        # (A line that ends by opening a bracket goes on below it: `() => {`, `import (`.)
        # The closers that start the rest of the line close the brackets still open before the cursor
        # first (counted outward from the cursor); only those left over close the completion's.
        leading = _LEADING_CLOSERS.match(shape.line_suffix).group(0)
        spare = max(0, sum(c in _CLOSE for c in leading) - max(0, open_brackets(shape.line_prefix)))
        text += "".join(_OPEN[c] for c in reversed(stack))[: max(0, len(stack) - spare)]
    return text


_LEADING_CLOSERS = re.compile(r"[\s)\]}]*")


_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffd]")


def drop_unprintable(text: str) -> str:
    """Cut before the first control character or U+FFFD (a broken byte sequence): never code.

    Broken bytes at the very start are dropped instead: the text before the cursor ends on a whole
    character, so they can only be stray pieces of one, and the rest may still be code.
    """
    text = text.lstrip("\ufffd")
    match = _UNPRINTABLE.search(text)
    return text[: match.start()] if match else text


# A piece of text four or more times back to back over 16 characters or more: what a model writes once
# it loops ("namenamename", "i * i * i * i", one line over and over), when the piece holds a word other
# than a literal. Pieces without one pass: rows of zeros, 0x00, \x00 or None, rulers, indentation, and
# one character repeated (0xffffffffffffffff).
_LOOP = re.compile(r"(.{1,32}?)\1{3,}", re.DOTALL)
_WORD = re.compile(r"(?<![0-9A-Za-z_\\])[A-Za-z_][0-9A-Za-z_]*")  # not a number's x or e, not an escape
_LITERALS = frozenset(
    {"None", "True", "False", "true", "false", "null", "nil", "undefined", "NULL", "nullptr"}
)
_MIN_LOOP = 16


def is_looping(text: str) -> bool:
    """Whether the model went round in a loop: nothing of such a completion is worth offering."""
    return any(
        len(match.group(0)) >= _MIN_LOOP
        and len(set(match.group(1).strip())) > 1
        and _has_word(match.group(1))
        for match in _LOOP.finditer(text)
    )


def _has_word(text: str) -> bool:
    return any(word not in _LITERALS for word in _WORD.findall(text))


def repeats_line_above(text: str, line_prefix: str, above: str) -> bool:
    """Whether text written on a blank line opens by writing the line above again, indentation and all:
    never the line wanted (on SantaCoder-FIM, not one such completion was right). Lines without a word
    (closing brackets) may repeat."""
    if line_prefix.strip():
        return False
    first = (line_prefix + text.split("\n", 1)[0]).rstrip()
    return first == above.rstrip() and _has_word(first)


def cut_repeated_line(text: str, shape: Shape) -> str:
    """Cut before a line that repeats the one before it, indentation and all: a model going round a loop.

    The first of them stays: it is often the line wanted. Lines without a word (closing brackets, rows
    of numbers, None) may repeat.
    """
    lines = text.split("\n")
    previous = (shape.line_prefix + lines[0]).rstrip()
    for index in range(1, len(lines)):
        line = lines[index].rstrip()
        if line == previous and _has_word(line):
            return "\n".join(lines[:index])
        previous = line
    return text


_TRAILING_WORD = re.compile(r"\w+\Z")


def cut_glued(text: str, line_suffix: str) -> str:
    """Cut the word a completion ends with when the rest of the line starts with a word character:
    inserted, the two would run into one identifier (`len` before `n // 2` makes `lenn`)."""
    if not line_suffix[:1] or not _WORD_CHAR.match(line_suffix[:1]):
        return text
    trailing = _TRAILING_WORD.search(text)
    return text[: trailing.start()] if trailing else text


_WORD_CHAR = re.compile(r"\w")


def postprocess(text: str, shape: Shape) -> str | None:
    """The completion to offer, or None when nothing useful is left."""
    text = drop_unprintable(text)
    text = keep_to_scope(text, shape)
    if repeats_line_above(text, shape.line_prefix, shape.line_above):
        return None
    text = cut_repeated_line(text, shape)
    if is_looping(text):
        return None
    text = cut_suffix_repeat(text, shape)
    text = finish_statement(text, shape)
    text = balance_brackets(text, shape)
    if not shape.multi_line:
        text = text.rstrip()
    text = cut_glued(text, shape.line_suffix)
    return text if text.strip() else None
