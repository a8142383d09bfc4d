"""Training examples shaped like editor completions, laid out by the engine's own FIM format."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dgemma_lsp.inline.lookup import MAX_KEY, Haystack, continuations
from engine.prompts import FimFormat

if TYPE_CHECKING:
    from training.repository import PackageContexts

MAX_CANVASES = 4
# Prompt tokens an example's repository context may take: up to the server's `context.workspaceTokens`.
CONTEXT_BUDGETS = (128, 256, 384)
SPAN_KINDS = ("rest_of_line", "lines", "block", "brackets", "random")
SPAN_WEIGHTS = (0.35, 0.2, 0.2, 0.1, 0.15)
_BLOCK_OPENER = re.compile(r"(:|\{|\bthen|\bdo|=>|\()\s*$")
_PAIRS = {"(": ")", "[": "]", "{": "}"}


@dataclass(frozen=True)
class Document:
    text: str
    language: str
    source: str = ""  # the package it comes from: its other files are its repository
    path: str = ""  # inside the corpus, "<package>-<version>/<path in the package>"


@dataclass(frozen=True)
class Span:
    start: int  # character offsets of the middle in the document
    end: int
    kind: str


@dataclass(frozen=True)
class Example:
    prompt: list[int]  # encoder input: layout(prefix, suffix) + middle tokens already written
    target: list[int]  # the canvas to predict: the next canvas of the middle, EOS, EOS fill
    middle_rest: list[int]  # tokens after the prompt for the autoregressive loss (middle + EOS)
    draft: list[int] | None = None  # a canvas the server's lookup would seed, EOS-filled; None: none


def load_documents(folder: Path, split: str, languages: set[str] | None = None) -> list[Document]:
    """Read the corpus builder's JSONL shards (`<folder>/<split>/*.jsonl`)."""
    documents = []
    for shard in sorted((folder / split).glob("*.jsonl")):
        with shard.open() as lines:
            for line in lines:
                row = json.loads(line)
                if languages is None or row["language"] in languages:
                    documents.append(Document(row["text"], row["language"], row["source"], row["path"]))
    if not documents:
        raise FileNotFoundError(f"no {split} documents under {folder}")
    return documents


class DocumentMix:
    """Draws training documents: uniformly by file (the corpus's own mix), or a language by weight first.

    By file, a language's share is its share of files; weights let a small corpus (Lua, a twentieth
    of Python's files) be drawn as often as the product needs it.
    """

    def __init__(self, documents: list[Document], weights: dict[str, float] | None = None) -> None:
        self.documents = documents
        self.by_language: dict[str, list[Document]] = {}
        if weights:
            for doc in documents:
                self.by_language.setdefault(doc.language, []).append(doc)
            unweighted = sorted(set(self.by_language) - set(weights))
            if unweighted:
                raise ValueError(f"language weights name no weight for {', '.join(unweighted)}")
            empty = sorted(lang for lang, w in weights.items() if w > 0 and lang not in self.by_language)
            if empty:
                raise ValueError(f"language weights name languages with no documents: {', '.join(empty)}")
        self.languages = [lang for lang in sorted(self.by_language) if weights and weights[lang] > 0]
        self.weights = [weights[lang] for lang in self.languages] if weights else []

    def draw(self, rng: random.Random) -> Document:
        if not self.languages:
            return self.documents[rng.randrange(len(self.documents))]
        pool = self.by_language[rng.choices(self.languages, self.weights)[0]]
        return pool[rng.randrange(len(pool))]


def _line_bounds(text: str, offset: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return start, len(text) if end < 0 else end


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _content_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line with something other than whitespace."""
    bounds, start = [], 0
    for line in text.split("\n"):
        if line.strip():
            bounds.append((start, start + len(line)))
        start += len(line) + 1
    return bounds


def choose_span(doc: Document, rng: random.Random, kind: str) -> Span | None:
    text = doc.text
    lines = _content_lines(text)
    if not lines:
        return None
    line_start, line_end = lines[rng.randrange(len(lines))]
    line = text[line_start:line_end]
    content_start = line_start + _indent(line)
    if kind == "rest_of_line":
        cursor = rng.randint(content_start, max(content_start, line_end - 1))
        return Span(cursor, line_end, kind)
    if kind == "lines":
        count = rng.choice((1, 1, 2, 3, 4))
        index = lines.index((line_start, line_end))
        last_end = lines[min(index + count - 1, len(lines) - 1)][1]
        # Editors put the cursor after the indentation; benchmarks (and some editors) at column 0.
        return Span(content_start if rng.random() < 0.5 else line_start, last_end, kind)
    if kind == "block":
        return _block_span(text, lines, rng)
    if kind == "brackets":
        return _bracket_span(text, rng)
    length = rng.randint(1, 200)
    start = rng.randint(0, max(0, len(text) - length))
    return Span(start, min(len(text), start + length), kind)


def _block_span(text: str, lines: list[tuple[int, int]], rng: random.Random) -> Span | None:
    """The body after a line that opens a block, up to the first line indented no deeper than the opener."""
    openers = [i for i, (s, e) in enumerate(lines[:-1]) if _BLOCK_OPENER.search(text[s:e])]
    if not openers:
        return None
    i = rng.choice(openers)
    opener_indent = _indent(text[lines[i][0] : lines[i][1]])
    j = i + 1
    while j < len(lines) and _indent(text[lines[j][0] : lines[j][1]]) > opener_indent:
        j += 1
    if j == i + 1:
        return None
    # The cursor sits at the end of the opener line, like an editor right after Enter... or before it.
    start = (
        lines[i][1]
        if rng.random() < 0.5
        else lines[i + 1][0] + _indent(text[lines[i + 1][0] : lines[i + 1][1]])
    )
    return Span(start, lines[j - 1][1], "block")


def _bracket_span(text: str, rng: random.Random) -> Span | None:
    opens = [m.start() for m in re.finditer(r"[(\[{]", text)]
    if not opens:
        return None
    for _ in range(8):
        start = rng.choice(opens)
        end = _matching(text, start)
        if end is not None and 0 < end - start - 1 <= 400:
            return Span(start + 1, end, "brackets")
    return None


def _matching(text: str, start: int) -> int | None:
    opener, closer, depth = text[start], _PAIRS[text[start]], 0
    for i in range(start, min(len(text), start + 2000)):
        if text[i] == opener:
            depth += 1
        elif text[i] == closer:
            depth -= 1
            if depth == 0:
                return i
    return None


class ExampleMaker:
    """Cuts a document at a cursor into prefix | middle | suffix, the way an editor asks.

    The middle is the rest of a line, a few whole lines, the body of a block just opened, the inside
    of brackets, or a random span. The prompt is laid out by `FimFormat.layout` (the function the
    engine uses), so training and inference agree on the suffix-first layout that makes KV reuse
    possible. Long middles become block-autoregressive examples: the first k canvases of the middle
    sit in the prompt after the middle marker, and the target is the next canvas.
    """

    def __init__(
        self,
        fmt: FimFormat,
        rng: random.Random,
        draft_share: float = 0.0,
        draft_rng: random.Random | None = None,
        contexts: PackageContexts | None = None,
        context_share: float = 0.0,
        context_rng: random.Random | None = None,
    ) -> None:
        self.fmt = fmt
        self.rng = rng
        self.draft_share = draft_share
        self.draft_rng = draft_rng
        self.contexts = contexts  # the other files of each document's package, read as the server reads
        self.context_share = context_share
        self.context_rng = context_rng

    def make(self, doc: Document, prompt_budget: int, canvas: int) -> Example | None:
        kind = self.rng.choices(SPAN_KINDS, SPAN_WEIGHTS)[0]
        span = choose_span(doc, self.rng, kind)
        if span is None:
            return None
        # Windows in characters first (cheap), then trimmed exactly in tokens.
        suffix_share = self.rng.uniform(0.0, 0.4)
        char_budget = prompt_budget * 5
        prefix = doc.text[max(0, span.start - char_budget) : span.start]
        suffix = doc.text[span.end : span.end + int(char_budget * suffix_share) + 1]
        middle = self.fmt.encode(doc.text[span.start : span.end])
        prefix_ids, suffix_ids = self.fmt.encode(prefix), self.fmt.encode(suffix)
        suffix_ids = suffix_ids[: int(prompt_budget * suffix_share)]
        prefix_ids = prefix_ids[max(0, len(prefix_ids) - (prompt_budget - len(suffix_ids) - 4)) :]
        context_ids, lookup_texts = self.repository_context(doc, span)
        prompt = self.fmt.layout(prefix_ids, suffix_ids, doc.language, context_ids)
        # Block-autoregressive continuation: some canvases of a long middle are already written.
        # A middle longer than MAX_CANVASES canvases is cut: editors never ask for more at once.
        middle = middle[: canvas * MAX_CANVASES + 1]
        written = canvas * self.rng.randint(0, (len(middle) - 1) // canvas) if len(middle) > canvas else 0
        eos = self.fmt.special.eos
        target = middle[written : written + canvas] + [eos]
        target = (target + [eos] * canvas)[:canvas]
        # The autoregressive loss reads at most two canvases on; EOS only where the middle really ends.
        rest = middle[written : written + 2 * canvas]
        ends = written + 2 * canvas >= len(middle) and len(middle) <= canvas * MAX_CANVASES
        draft = self.draft_for(doc, span, canvas, lookup_texts) if not written else None
        return Example(
            prompt=prompt + middle[:written],
            target=target,
            middle_rest=rest + [eos] if ends else rest,
            draft=draft,
        )

    def repository_context(self, doc: Document, span: Span) -> tuple[list[int], tuple[str, ...]]:
        """(the prompt's snippet ids, the lookup draft's texts): what the server would read from the rest
        of the document's package, in a share of examples."""
        rng = self.context_rng
        if self.contexts is None or rng is None or rng.random() >= self.context_share:
            return [], ()
        held = doc.text[: span.start] + doc.text[span.end :]
        budget = rng.choice(CONTEXT_BUDGETS)
        related = self.contexts.related(
            doc, held, span.start, budget, lambda text: len(self.fmt.encode(text))
        )
        return self.fmt.context_ids(related.snippets, budget), related.lookup_texts

    def draft_for(
        self, doc: Document, span: Span, canvas: int, lookup_texts: tuple[str, ...] = ()
    ) -> list[int] | None:
        """The server's lookup draft for this cursor, on the file as an editor holds it (no middle), then on
        the files its repository retrieval chose."""
        if self.draft_rng is None or self.draft_rng.random() >= self.draft_share:
            return None
        lines = doc.text.count("\n", span.start, span.end) + 1
        held = doc.text[: span.start] + doc.text[span.end :]
        before = doc.text[max(0, span.start - MAX_KEY) : span.start]
        haystacks = [Haystack(held, span.start - 1, span.start), *(Haystack(t) for t in lookup_texts)]
        found = continuations(before, haystacks, lines, 1)
        if not found:
            return None
        eos = self.fmt.special.eos
        return (self.fmt.encode(found[0])[:canvas] + [eos] * canvas)[:canvas]


def examples(
    mix: DocumentMix,
    fmt: FimFormat,
    rng: random.Random,
    prompt_budget: int,
    canvas: int,
    draft_share: float = 0.0,
    contexts: PackageContexts | None = None,
    context_share: float = 0.0,
    context_seed: int | None = None,
) -> Iterator[Example]:
    # Drafts and repository context draw from random streams of their own; with `context_seed` the
    # context's stream takes nothing from `rng`, so the spans are those of the same call without it.
    with_context = contexts is not None and context_share > 0
    context_rng = None
    if with_context:
        context_rng = random.Random(context_seed if context_seed is not None else rng.random())
    maker = ExampleMaker(
        fmt,
        rng,
        draft_share,
        random.Random(rng.random()) if draft_share else None,
        contexts,
        context_share,
        context_rng,
    )
    while True:
        example = maker.make(mix.draw(rng), prompt_budget, canvas)
        if example is not None and len(example.middle_rest) > 1:
            yield example
