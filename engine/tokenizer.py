"""The tokenizer of our own models at run time: FIM and control tokens at fixed ids, and loading.

The special tokens come first so that every model we train shares the same ids for them
(pad 0, eos 1, bos 2 as DiffusionGemma's config expects), whatever the vocabulary size.
`training.tokenizer` trains the byte-level BPE around them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

PAD, EOS, BOS, UNK = "<pad>", "<eos>", "<bos>", "<unk>"
FIM_PREFIX, FIM_SUFFIX, FIM_MIDDLE = "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"
# DiffusionGemma's config names image tokens; they get dedicated ids instead of ordinary BPE ids.
IMAGE, BOI, EOI = "<|image|>", "<|boi|>", "<|eoi|>"
EDIT = "<|edit|>"
# Opens each snippet of another file of the repository in the prompt (`FimFormat.layout`). It takes the
# slot of the first reserved token, so tokenizers made before it keep their ids; theirs has no such
# token by name, and their prompts carry no repository context.
FILE_SEP = "<|file_sep|>"

# Languages the prompt names with one token; anything else uses <|lang:other|>.
LANGUAGES = (
    "python",
    "javascript",
    "typescript",
    "lua",
    "rust",
    "go",
    "c",
    "cpp",
    "java",
    "bash",
    "other",
)
N_SPECIAL = 32  # the rest of the first 32 ids are reserved for later control tokens


def language_token(language: str) -> str:
    return f"<|lang:{language if language in LANGUAGES else 'other'}|>"


def special_tokens() -> list[str]:
    named = [PAD, EOS, BOS, UNK, FIM_PREFIX, FIM_SUFFIX, FIM_MIDDLE, IMAGE, BOI, EOI, EDIT]
    named += [language_token(lang) for lang in LANGUAGES]
    named.append(FILE_SEP)  # was <|reserved_0|>: the reserved ones keep their names and ids
    reserved = [f"<|reserved_{i}|>" for i in range(1, N_SPECIAL - len(named) + 1)]
    return named + reserved


@dataclass(frozen=True)
class SpecialIds:
    pad: int
    eos: int
    bos: int
    fim_prefix: int
    fim_suffix: int
    fim_middle: int
    all: tuple[int, ...]
    file_sep: int | None = None  # None: a tokenizer made before it (no repository context)

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> SpecialIds:
        def require(token: str) -> int:
            token_id = tokenizer.token_to_id(token)
            if token_id is None:
                raise ValueError(f"tokenizer has no {token} token: not a dgemma-lsp FIM tokenizer")
            return token_id

        present = (tokenizer.token_to_id(t) for t in special_tokens())
        return cls(
            pad=require(PAD),
            eos=require(EOS),
            bos=require(BOS),
            fim_prefix=require(FIM_PREFIX),
            fim_suffix=require(FIM_SUFFIX),
            fim_middle=require(FIM_MIDDLE),
            all=tuple(i for i in present if i is not None),
            file_sep=tokenizer.token_to_id(FILE_SEP),
        )


def load_tokenizer(path: Path) -> Tokenizer:
    return Tokenizer.from_file(str(path))
