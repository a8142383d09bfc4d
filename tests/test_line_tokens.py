"""Line-by-line tokenizing with a memo gives exactly the ids of tokenizing the whole text."""

from __future__ import annotations

import random
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

from engine.line_tokens import _LINE_CUT, LineMemoEncoder, splits_at_line_breaks
from engine.prompts import FimFormat
from engine.tokenizer import load_tokenizer
from training.tokenizer import train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = load_tokenizer(ROOT / "engine" / "default" / "tokenizer.json")
PIECES = [
    "\n", "\r\n", "\r", "\n\n", "  \n", "\t\n", " ", "  ", "\t", "a", "Zed", "1", "234", "é", "中文",
    "(", ")", "::", "->", "#", "'", '"', "\u00a0", "\u2028", "<|fim_prefix|>", "<eos>", "    ",
]  # fmt: skip


def whole(tokenizer: Tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids


def test_the_bundled_tokenizer_splits_at_line_breaks() -> None:
    assert splits_at_line_breaks(BUNDLED)


def test_a_tokenizer_the_trainer_makes_splits_at_line_breaks() -> None:
    texts = [p.read_text() for p in sorted((ROOT / "engine").glob("*.py"))]
    trained = train_tokenizer(texts, vocab_size=400)
    assert splits_at_line_breaks(trained)
    encoder = LineMemoEncoder(trained)
    assert all(encoder.encode(text) == whole(trained, text) for text in texts)


def test_source_files_encode_exactly_as_whole_texts() -> None:
    encoder = LineMemoEncoder(BUNDLED)
    files = sorted((ROOT / "engine").glob("*.py")) + sorted((ROOT / "fixtures").rglob("*.*"))
    texts = [p.read_text(errors="replace") for p in files if p.is_file() and p.stat().st_size < 200_000]
    assert len(texts) > 10
    for text in texts:
        assert encoder.encode(text) == whole(BUNDLED, text)
        crlf = text.replace("\n", "\r\n")
        assert encoder.encode(crlf) == whole(BUNDLED, crlf)


def test_random_texts_of_line_breaks_spaces_and_specials_encode_exactly() -> None:
    encoder = LineMemoEncoder(BUNDLED)
    rng = random.Random(7)
    for _ in range(5000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 24)))
        assert encoder.encode(text) == whole(BUNDLED, text), repr(text)


class CountingTokenizer:
    """The bundled tokenizer, recording the pieces it is asked to encode (a spy: it still encodes)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.encoded: list[str] = []

    def to_str(self) -> str:
        return self.tokenizer.to_str()

    def encode_batch(self, pieces: list[str], add_special_tokens: bool):
        self.encoded += pieces
        return self.tokenizer.encode_batch(pieces, add_special_tokens=add_special_tokens)

    def encode(self, piece: str, add_special_tokens: bool):
        self.encoded.append(piece)
        return self.tokenizer.encode(piece, add_special_tokens=add_special_tokens)


def test_typing_reuses_remembered_lines_and_stays_exact() -> None:
    spy = CountingTokenizer(BUNDLED)
    encoder = LineMemoEncoder(spy)
    text = (ROOT / "engine" / "sampler.py").read_text()
    cursor = text.index("\n", len(text) // 2)
    encoder.encode(text[:cursor])
    assert len(spy.encoded) > 100  # the first time, every line
    for typed in range(1, 12):
        spy.encoded.clear()
        prefix = text[:cursor] + "value = compute("[:typed]
        assert encoder.encode(prefix) == whole(BUNDLED, prefix)
        assert spy.encoded == [_LINE_CUT.split(prefix)[-1]]  # only the line being typed, once


def test_the_memo_stays_within_its_capacity() -> None:
    encoder = LineMemoEncoder(BUNDLED, capacity=50)
    text = "".join(f"line_{i} = {i}\n" for i in range(400))
    assert encoder.encode(text) == whole(BUNDLED, text)
    assert 0 < len(encoder.memo) <= 50
    for start in range(0, 400, 30):  # windows of other lines come and go: never more than it holds
        window = "".join(f"line_{i} = {i}\n" for i in range(start, start + 40))
        assert encoder.encode(window) == whole(BUNDLED, window)
        assert len(encoder.memo) <= 50


def test_another_pre_tokenizer_encodes_whole_texts() -> None:
    # A pre-tokenizer that may join a line break to the text before it: cutting at line breaks
    # would change the ids, so the encoder must not.
    vocab = {chr(c): i for i, c in enumerate(range(32, 127))}
    vocab.update({"\n": len(vocab), "a\n": len(vocab) + 1})
    other = Tokenizer(models.WordLevel(vocab, unk_token="a"))
    other.pre_tokenizer = pre_tokenizers.Split(pattern="b", behavior="removed")
    assert not splits_at_line_breaks(other)
    encoder = LineMemoEncoder(other)
    assert encoder.encode("xa\nb") == whole(other, "xa\nb")
    assert encoder.memo == {}


def test_fim_format_encodes_through_the_memo() -> None:
    fmt = FimFormat(BUNDLED)
    text = "def f(x):\n    return x + 1\n"
    assert fmt.encode(text) == whole(BUNDLED, text)
    assert fmt.lines.memo
