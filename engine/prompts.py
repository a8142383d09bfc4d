"""Prompt formats, one per model family.

`FimFormat` (our own models) lays the prompt out as the other files' snippets, then the suffix, then
the prefix, then the middle marker (SPM order). Typing at the cursor only appends to the prefix, so
the prompt of the next keystroke shares all but its last few tokens with this one and the encoder's
KV cache is reused up to there; the snippets come first because they change least. The trainer
(`training.data`) builds its examples with `FimFormat.layout` too, so the layout lives in this one place.

`Gemma4ChatFormat` wraps the snippets, prefix and suffix in an instruction for the released
instruction-tuned checkpoint, through the chat template its tokenizer ships.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from tokenizers import Tokenizer

from engine.api import Snippet
from engine.line_tokens import LineMemoEncoder
from engine.tokenizer import FILE_SEP, FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX, SpecialIds, language_token

CURSOR_MARK = "<|missing code|>"
Piece = TypeVar("Piece")
Window = TypeVar("Window", bound=Sequence)


class PromptFormat(Protocol):
    family: str
    vocab_size: int
    eos_ids: frozenset[int]
    # Token ids the canvas may never hold (control tokens other than EOS).
    suppressed_ids: tuple[int, ...]

    def prompt_ids(
        self, prefix: str, suffix: str, language: str, max_tokens: int, context: tuple[Snippet, ...] = ()
    ) -> list[int]: ...

    def encode(self, text: str) -> list[int]: ...

    def token_spans(self, text: str) -> list[tuple[int, int]]: ...

    def decode(self, ids: list[int]) -> str: ...

    def clean(self, text: str) -> str: ...


class FimFormat:
    family = "fim"

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.lines = LineMemoEncoder(tokenizer)  # a keystroke re-tokenizes one line, not the windows
        self.special = SpecialIds.of(tokenizer)
        self.vocab_size = tokenizer.get_vocab_size()
        self.eos_ids = frozenset({self.special.eos})
        self.suppressed_ids = tuple(i for i in self.special.all if i != self.special.eos)

    def encode(self, text: str) -> list[int]:
        return self.lines.encode(text)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) characters of each token of `encode(text)`."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).offsets)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def clean(self, text: str) -> str:
        return text

    def context_ids(self, context: tuple[Snippet, ...], budget: int) -> list[int]:
        """<file_sep> path, a line break and the code, for each snippet that fits in `budget` tokens, in
        order (none with a tokenizer that has no file separator)."""
        sep = self.special.file_sep
        if sep is None:
            return []
        ids: list[int] = []
        for snippet in context:
            encoded = [sep, *self.encode(snippet_text(snippet))]
            if len(ids) + len(encoded) > budget:
                break
            ids += encoded
        return ids

    def layout(
        self, prefix_ids: list[int], suffix_ids: list[int], language: str, context_ids: list[int] = ()
    ) -> list[int]:
        """The prompt's ids in `fim_order`."""
        lang = self.tokenizer.token_to_id(language_token(language))
        s = self.special
        return fim_order(
            lang, list(context_ids), s.fim_suffix, s.fim_prefix, s.fim_middle, suffix_ids, prefix_ids
        )

    @staticmethod
    def prompt_text(prefix: str, suffix: str, language: str, context: Sequence[Snippet] = ()) -> str:
        """The same layout as text, its control tokens spelled out: for a server that tokenizes the
        prompt itself (a remote engine, which has no tokenizer here), read as `layout`'s ids. The
        snippets are the caller's to fit, and only for a tokenizer with a file separator."""
        files = [FILE_SEP + snippet_text(snippet) for snippet in context]
        order = fim_order(
            language_token(language), files, FIM_SUFFIX, FIM_PREFIX, FIM_MIDDLE, [suffix], [prefix]
        )
        return "".join(order)

    def prompt_ids(
        self, prefix: str, suffix: str, language: str, max_tokens: int, context: tuple[Snippet, ...] = ()
    ) -> list[int]:
        budget = max_tokens - 4
        context_ids = self.context_ids(context, budget // CONTEXT_SHARE)
        prefix_ids, suffix_ids = self.encode(prefix), self.encode(suffix)
        prefix_ids, suffix_ids = fit_windows(prefix_ids, suffix_ids, budget - len(context_ids))
        return self.layout(prefix_ids, suffix_ids, language, context_ids)


# The other files' snippets take at most 1/CONTEXT_SHARE of a prompt: the file's own windows come first.
CONTEXT_SHARE = 2


def fim_order(
    lang: Piece,
    context: list[Piece],
    fim_suffix: Piece,
    fim_prefix: Piece,
    fim_middle: Piece,
    suffix: list[Piece],
    prefix: list[Piece],
) -> list[Piece]:
    """[lang] (<file_sep> path code)* <fim_suffix> suffix <fim_prefix> prefix <fim_middle>: the one place
    the order is defined, for ids (`FimFormat.layout`) and for text (`FimFormat.prompt_text`) alike."""
    return [lang, *context, fim_suffix, *suffix, fim_prefix, *prefix, fim_middle]


def snippet_text(snippet: Snippet) -> str:
    """A snippet as the FIM prompt holds it after its file separator: the path, a line break, the code."""
    return f"{snippet.path}\n{snippet.text}"


def fit_windows(prefix_ids: Window, suffix_ids: Window, budget: int) -> tuple[Window, Window]:
    """Keep the end of the prefix and the start of the suffix; the prefix gets >= 3/4 of a tight budget
    (in ids, or in characters for a text whose tokens are counted elsewhere)."""
    budget = max(budget, 0)
    if len(prefix_ids) + len(suffix_ids) <= budget:
        return prefix_ids, suffix_ids
    suffix_keep = min(len(suffix_ids), max(budget // 4, budget - len(prefix_ids)))
    prefix_keep = budget - suffix_keep
    return prefix_ids[len(prefix_ids) - prefix_keep :], suffix_ids[:suffix_keep]


INSTRUCTION = (
    "You are a code completion engine. Below is a {language} file with one gap marked {mark}. "
    "Reply with exactly the code that belongs at the gap: no explanation, no code fences, "
    "and nothing that already comes before or after the gap.\n\n{prefix}{mark}{suffix}"
)
CONTEXT_INSTRUCTION = "Code from other files of the same repository, for reference:\n\n{snippets}\n\n"
SNIPPET = "--- {path} ---\n{text}"


def context_text(snippets: Sequence[str]) -> str:
    """The chat prompt's paragraph of other files' snippets (`SNIPPET` blocks); empty without any."""
    return CONTEXT_INSTRUCTION.format(snippets="\n\n".join(snippets)) if snippets else ""


_FENCE = re.compile(r"^```[\w+-]*\n(.*?)\n?```\s*$", re.DOTALL)


def strip_fences(text: str) -> str:
    """Chat models wrap code in fences even when told not to."""
    match = _FENCE.match(text.strip("\n"))
    return match.group(1) if match else text


class Gemma4ChatFormat:
    """For `google/diffusiongemma-26B-A4B-it`: an instruction that asks for the missing middle only."""

    family = "gemma4-chat"

    def __init__(self, hf_tokenizer: Any) -> None:
        self.tokenizer = hf_tokenizer
        self.vocab_size = len(hf_tokenizer)
        ends = {hf_tokenizer.eos_token_id, hf_tokenizer.convert_tokens_to_ids("<end_of_turn>")}
        ends |= {hf_tokenizer.convert_tokens_to_ids("<turn|>")}
        unk = hf_tokenizer.unk_token_id
        self.eos_ids = frozenset(i for i in ends if isinstance(i, int) and i != unk)
        specials = set(hf_tokenizer.all_special_ids) - set(self.eos_ids)
        self.suppressed_ids = tuple(sorted(specials))

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [tuple(span) for span in encoded["offset_mapping"]]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def clean(self, text: str) -> str:
        return strip_fences(text)

    @staticmethod
    def messages(
        prefix: str, suffix: str, language: str, snippets: Sequence[str] = ()
    ) -> list[dict[str, str]]:
        """The chat that asks for the middle, after the other files' `snippets` (`SNIPPET` blocks): what
        the chat template lays out here, and what a remote engine sends for the server to lay out with
        the template it serves."""
        content = context_text(snippets) + INSTRUCTION.format(
            language=language or "source", mark=CURSOR_MARK, prefix=prefix, suffix=suffix
        )
        return [{"role": "user", "content": content}]

    def prompt_ids(
        self, prefix: str, suffix: str, language: str, max_tokens: int, context: tuple[Snippet, ...] = ()
    ) -> list[int]:
        budget = max_tokens - 96
        kept, used = [], 0
        for snippet in context:  # as many as fit in their share, in order
            block = SNIPPET.format(path=snippet.path, text=snippet.text)
            cost = len(self.encode(block)) + 2
            if used + cost > budget // CONTEXT_SHARE:
                break
            kept.append(block)
            used += cost
        room = budget - (len(self.encode(context_text(kept))) if kept else 0)
        prefix_ids, suffix_ids = fit_windows(self.encode(prefix), self.encode(suffix), room)
        chat = self.messages(self.decode(prefix_ids), self.decode(suffix_ids), language, kept)
        ids = self.tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=True)
        if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding here
            ids = ids["input_ids"]
        return list(ids)
