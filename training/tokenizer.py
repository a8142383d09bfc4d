"""Train the byte-level BPE of our own models, with the runtime's special tokens at ids 0..N_SPECIAL-1."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from engine.line_tokens import PRE_TOKENIZER_PATTERN
from engine.tokenizer import special_tokens
from training.data import load_documents


def new_bpe_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRE_TOKENIZER_PATTERN), behavior="isolated"),
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


def tokenizer_from_corpus(corpus: Path, vocab_size: int, sample_mb: float) -> tuple[Tokenizer, int]:
    """Train on a seeded sample of the corpus' train split: (tokenizer, characters read)."""
    documents = load_documents(corpus, "train")
    rng = random.Random(0)
    rng.shuffle(documents)
    texts, size = [], 0
    for doc in documents:
        texts.append(doc.text)
        size += len(doc.text)
        if size > sample_mb * 1e6:
            break
    return train_tokenizer(texts, vocab_size), size
