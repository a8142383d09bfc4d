"""No-model baselines: the copy heuristic, and its exact match and edit similarity by kind.

The copy heuristic is the floor a model must beat on editor positions: code repeats itself, so
find where the text just before the cursor occurred earlier in the file and propose what followed
it there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from evaluation.benchmarks import Convention, Item
from evaluation.metrics import edit_similarity, exact_match, mean

MIN_MATCH = 4  # characters: shorter keys ("x = ", "if ") repeat by chance


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def copy_completion(prefix: str, suffix: str, kind: str) -> str:
    """What followed the longest earlier occurrence of the text before the cursor, or "".

    The key is the cursor's line after its indentation (for a cursor on a fresh body line, the
    block's header line). A match stays on one line; the proposal is the rest of the matched line
    (rest_of_line, expression: less the text the suffix already holds on the cursor's line) or, for
    a block, the body under the matched line, as many lines as that earlier scope has, re-indented.
    On an emptied line (`line`) the key is the line above, matched at a line's end, and the proposal
    the line after the match.
    """
    lines = prefix.split("\n")
    if kind == "line":
        return _line_after_match(lines)
    fresh_body = kind == "block" and not lines[-1].strip() and len(lines) > 1
    key_line = lines[-2] if fresh_body else lines[-1]
    earlier = lines[:-2] if fresh_body else lines[:-1]
    key, text = key_line.lstrip(), "\n".join(earlier)
    for size in range(len(key), MIN_MATCH - 1, -1):
        at = text.rfind(key[-size:])
        if at >= 0:
            break
    else:
        return ""
    row = text.count("\n", 0, at)
    line_end = text.find("\n", at)
    rest = text[at + size : None if line_end < 0 else line_end]
    if kind != "block":
        tail = suffix.split("\n", 1)[0]
        return rest[: -len(tail)] if tail.strip() and rest.endswith(tail) else rest
    body: list[str] = []
    base = _indent(earlier[row])
    for line in earlier[row + 1 :]:
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


def _line_after_match(lines: list[str]) -> str:
    """The line after the latest earlier line that ends with the longest end of the line above the
    cursor, unindented: the other kinds' key and proposal, moved one line up."""
    key, text = lines[-2].strip() if len(lines) > 1 else "", "\n".join(lines[:-2]) + "\n"
    for size in range(len(key), MIN_MATCH - 1, -1):
        at = text.rfind(key[-size:] + "\n")
        while at >= 0:
            following = text[at + size + 1 :].split("\n", 1)[0].strip()
            if following:
                return following
            at = text.rfind(key[-size:] + "\n", 0, at)
    return ""


@dataclass(frozen=True)
class KindScore:
    """Copy-baseline figures for one kind of position (or "all")."""

    kind: str
    n: int
    exact_match: float
    edit_similarity: float
    proposed: float  # share of positions where the heuristic proposed something


def score_copy_baseline(items: Iterable[Item], convention: Convention = "whitespace") -> list[KindScore]:
    """Exact match and edit similarity of the copy heuristic, per kind and over all items."""
    rows: dict[str, list[tuple[bool, float, bool]]] = defaultdict(list)
    for item in items:
        guess = copy_completion(item.prefix, item.suffix, item.kind)
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
