"""No-model baselines: the copy heuristic, and its exact match and edit similarity by kind.

The copy heuristic is the floor a model must beat on editor positions: code repeats itself, so
find where the text just before the cursor occurred earlier in the file and propose what followed
it there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from evaluation.benchmarks import Convention, Item
from evaluation.metrics import edit_similarity, exact_match, mean

MIN_MATCH = 4  # characters: shorter keys ("x = ", "if ") repeat by chance


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


class SearchTexts:
    """The texts the heuristic searches, the text before the cursor's line first, then other files.

    A key never holds a newline, so the texts are searched as one, joined by newlines, and a match found
    there lies inside one of them."""

    def __init__(self, earlier: str, others: Sequence[str] = ()) -> None:
        """Search `earlier` (the text before the cursor's line) first, then `others`."""
        self.texts = [earlier, *others]
        self.joined = "\n".join(self.texts) if others else earlier

    def longest(self, key: str, tail: str = "") -> int:
        """The length of the longest end of `key` (at least MIN_MATCH) that occurs followed by `tail`, or 0.

        Any shorter end of a key that occurs occurs too, so a binary search finds it."""
        low, high, best = MIN_MATCH, len(key), 0
        while low <= high:
            size = (low + high) // 2
            if key[len(key) - size :] + tail in self.joined:
                best, low = size, size + 1
            else:
                high = size - 1
        return best

    def occurrences(self, needle: str) -> Iterator[tuple[str, int]]:
        """(text, offset) of each occurrence of `needle`: the earlier text's, latest first, then each
        other file's in turn."""
        for text in self.texts:
            at = text.rfind(needle)
            while at >= 0:
                yield text, at
                at = text.rfind(needle, 0, at)


def copy_completion(prefix: str, suffix: str, kind: str, others: Sequence[str] = ()) -> str:
    """What followed the longest earlier occurrence of the text before the cursor, or "".

    The key is the cursor's line after its indentation (for a cursor on a fresh body line, the
    block's header line). A match stays on one line; the proposal is the rest of the matched line
    (rest_of_line, expression: less the text the suffix already holds on the cursor's line) or, for
    a block, the body under the matched line, as many lines as that earlier scope has, re-indented.
    On an emptied line (`line`) the key is the line above, matched at a line's end, and the proposal
    the line after the match. `others` (other files' texts) are searched after the file's own earlier
    text: the longest match wins, the file's own on a tie.
    """
    lines = prefix.split("\n")
    if kind == "line":
        return _line_after_match(lines, others)
    fresh_body = kind == "block" and not lines[-1].strip() and len(lines) > 1
    key_line = lines[-2] if fresh_body else lines[-1]
    earlier = lines[:-2] if fresh_body else lines[:-1]
    key, haystack = key_line.lstrip(), SearchTexts("\n".join(earlier), others)
    size = haystack.longest(key)
    if not size:
        return ""
    text, at = next(haystack.occurrences(key[-size:]))
    row = text.count("\n", 0, at)
    line_end = text.find("\n", at)
    rest = text[at + size : None if line_end < 0 else line_end]
    if kind != "block":
        tail = suffix.split("\n", 1)[0]
        return rest[: -len(tail)] if tail.strip() and rest.endswith(tail) else rest
    body: list[str] = []
    text_lines = text.split("\n")
    base = _indent(text_lines[row])
    for line in text_lines[row + 1 :]:
        if line.strip() and len(_indent(line)) <= len(base):
            break
        body.append(_indent(key_line) + line[len(base) :] if line.strip() else "")
    while body and not body[-1]:
        body.pop()
    if not body:
        return ""
    return (
        body[0].lstrip() + "".join("\n" + b for b in body[1:])
        if fresh_body
        else rest + "\n" + "\n".join(body)
    )


def _line_after_match(lines: list[str], others: Sequence[str] = ()) -> str:
    """The line after the latest earlier line that ends with the longest end of the line above the
    cursor, unindented: the other kinds' key and proposal, moved one line up."""
    key = lines[-2].strip() if len(lines) > 1 else ""
    haystack = SearchTexts("\n".join(lines[:-2]) + "\n", [text + "\n" for text in others])
    for size in range(haystack.longest(key, "\n"), MIN_MATCH - 1, -1):
        for text, at in haystack.occurrences(key[-size:] + "\n"):
            following = text[at + size + 1 :].split("\n", 1)[0].strip()
            if following:
                return following
    return ""


@dataclass(frozen=True)
class KindScore:
    """Copy-baseline figures for one kind of position (or "all")."""

    kind: str
    n: int
    exact_match: float
    edit_similarity: float
    proposed: float  # share of positions where the heuristic proposed something


def score_copy_baseline(
    items: Iterable[Item],
    convention: Convention = "whitespace",
    others: Callable[[Item], Sequence[str]] | None = None,
) -> list[KindScore]:
    """Exact match and edit similarity of the copy heuristic, per kind and over all items; with `others`
    (an item's other files' texts) it searches those too."""
    rows: dict[str, list[tuple[bool, float, bool]]] = defaultdict(list)
    for item in items:
        guess = copy_completion(item.prefix, item.suffix, item.kind, others(item) if others else ())
        row = (
            exact_match(guess, item.middle, convention),
            edit_similarity(guess, item.middle, convention),
            bool(guess),
        )
        rows[item.kind or "?"].append(row)
        rows["all"].append(row)
    return [
        KindScore(
            kind,
            len(scored),
            mean([float(em) for em, _, _ in scored]) or 0.0,
            mean([es for _, es, _ in scored]) or 0.0,
            mean([float(p) for _, _, p in scored]) or 0.0,
        )
        for kind, scored in sorted(rows.items(), key=lambda kv: (kv[0] == "all", kv[0]))
    ]
