"""Prompt formats: the FIM layout of our models, and the Gemma 4 chat instruction for the released one."""

from __future__ import annotations

from transformers import PreTrainedTokenizerFast

from engine.prompts import CURSOR_MARK, FimFormat, Gemma4ChatFormat, fit_windows, strip_fences
from engine.tokenizer import EOS, FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX, language_token


def test_fim_layout_is_suffix_first_then_prefix_then_middle(tiny_engine):
    fmt: FimFormat = tiny_engine.format
    ids = fmt.prompt_ids("def f(x):\n    return ", "\n\nprint(f(1))\n", "python", 256)
    token = fmt.tokenizer.token_to_id
    assert ids[0] == token(language_token("python"))
    assert ids[1] == token(FIM_SUFFIX) and ids[-1] == token(FIM_MIDDLE)
    assert fmt.decode(ids[2 : ids.index(token(FIM_PREFIX))]) == "\n\nprint(f(1))\n"
    assert fmt.decode(ids[ids.index(token(FIM_PREFIX)) + 1 : -1]) == "def f(x):\n    return "


def test_typing_at_the_cursor_only_changes_the_end_of_the_prompt(tiny_engine):
    fmt = tiny_engine.format
    before = fmt.prompt_ids("x = compute(", ")\n", "python", 256)
    after = fmt.prompt_ids("x = compute(va", ")\n", "python", 256)
    shared = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b)
    assert shared >= len(before) - 3


def test_fit_windows_keeps_the_prefix_end_and_the_suffix_start():
    prefix, suffix = list(range(100)), list(range(1000, 1100))
    kept_prefix, kept_suffix = fit_windows(prefix, suffix, 40)
    assert kept_prefix == prefix[-30:] and kept_suffix == suffix[:10]


def test_gemma4_chat_format_asks_for_the_middle_only(tiny_engine):
    # The released checkpoint's tokenizer cannot be downloaded here: a fast tokenizer with a
    # Gemma-style chat template stands in for it, built from the tiny model's BPE.
    hf = PreTrainedTokenizerFast(tokenizer_object=tiny_engine.format.tokenizer, eos_token=EOS)
    hf.chat_template = (
        "{% for m in messages %}<start_of_turn>user\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
        "<start_of_turn>model\n"
    )
    fmt = Gemma4ChatFormat(hf)
    ids = fmt.prompt_ids("def add(a, b):\n    ", "\n", "python", 512)
    text = hf.decode(ids)
    assert f"def add(a, b):\n    {CURSOR_MARK}\n" in text
    assert "exactly the code that belongs at the gap" in text
    assert text.rstrip().endswith("<start_of_turn>model")
    assert fmt.eos_ids == frozenset({hf.eos_token_id})
    assert fmt.clean("```python\nreturn a + b\n```") == "return a + b"


def test_fences_are_stripped_only_around_the_whole_answer():
    assert strip_fences("```\nx = 1\n```") == "x = 1"
    assert strip_fences("x = 1  # ``` inside") == "x = 1  # ``` inside"
