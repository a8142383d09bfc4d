"""Train the byte-level BPE of our own models, with the runtime's special tokens at ids 0..N_SPECIAL-1."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from engine.tokenizer import special_tokens

# Code-aware pre-tokenization: a newline run keeps the next line's indentation in the same piece,
# so BPE learns tokens like "\n        " that carry a line's whole indentation.
_SPLIT = (
    r"(?:\r?\n)+[ \t]*"
    r"|[ \t]+(?=\r?\n)"
    r"|[^\r\n\p{L}\p{N}]?\p{L}+"
    r"| ?\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+"
    r"|[ \t]+(?!\S)"
    r"|[ \t]+"
)


def new_bpe_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train the BPE merges; special tokens take ids 0..N_SPECIAL-1."""
    tokenizer = new_bpe_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens(),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tokenizer.train_from_iterator(_nonempty(texts), trainer=trainer)
    return tokenizer


def _nonempty(texts: Iterable[str]) -> Iterator[str]:
    return (t for t in texts if t)
