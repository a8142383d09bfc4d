"""Prompt formats: the FIM layout of our models, and the Gemma 4 chat instruction for the released one."""

from __future__ import annotations

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from engine.api import Snippet
from engine.prompts import CURSOR_MARK, FimFormat, Gemma4ChatFormat, fit_windows, strip_fences
from engine.tokenizer import EOS, FILE_SEP, FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX, language_token


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


CONTEXT = (
    Snippet("pkg/geometry.py", "def area(width: float, height: float) -> float:\n    return width * height"),
    Snippet("pkg/units.py", "METRES_PER_FOOT = 0.3048"),
)


def test_other_files_come_first_each_after_a_file_separator(tiny_engine):
    fmt: FimFormat = tiny_engine.format
    ids = fmt.prompt_ids("x = area(", ")\n", "python", 512, CONTEXT)
    token = fmt.tokenizer.token_to_id
    sep, suffix_at = token(FILE_SEP), ids.index(token(FIM_SUFFIX))
    assert ids[0] == token(language_token("python")) and ids[1] == sep
    assert [i for i, t in enumerate(ids[:suffix_at]) if t == sep] == [1, ids.index(sep, 2)]
    second = ids.index(sep, 2)
    assert fmt.decode(ids[2:second]) == f"{CONTEXT[0].path}\n{CONTEXT[0].text}"
    assert fmt.decode(ids[second + 1 : suffix_at]) == f"{CONTEXT[1].path}\n{CONTEXT[1].text}"
    # Typing at the cursor changes nothing before the prefix's end: the snippets' KV is reused.
    typed = fmt.prompt_ids("x = area(wid", ")\n", "python", 512, CONTEXT)
    assert typed[: ids.index(token(FIM_PREFIX)) + 1] == ids[: ids.index(token(FIM_PREFIX)) + 1]


def test_snippets_take_at_most_half_the_prompt_and_never_the_files_windows(tiny_engine):
    fmt: FimFormat = tiny_engine.format
    prefix = "".join(f"value_{i} = compute({i})\n" for i in range(200))
    many = tuple(Snippet(f"pkg/m{i}.py", f"def helper_{i}(x):\n    return x * {i}\n") for i in range(100))
    ids = fmt.prompt_ids(prefix, "\n", "python", 512, many)
    token = fmt.tokenizer.token_to_id
    assert len(ids) <= 512
    assert 0 < ids.index(token(FIM_SUFFIX)) <= 1 + (512 - 4) // 2
    assert fmt.decode(ids[ids.index(token(FIM_PREFIX)) + 1 : -1]).endswith("value_199 = compute(199)\n")


def test_a_tokenizer_without_a_file_separator_reads_no_context(tiny_engine):
    old = Tokenizer.from_str(tiny_engine.format.tokenizer.to_str().replace(FILE_SEP, "<|reserved_0|>"))
    fmt = FimFormat(old)
    assert fmt.prompt_ids("x = area(", ")\n", "python", 512, CONTEXT) == fmt.prompt_ids(
        "x = area(", ")\n", "python", 512
    )


def test_gemma4_chat_format_shows_other_files_before_the_gap(tiny_engine):
    hf = PreTrainedTokenizerFast(tokenizer_object=tiny_engine.format.tokenizer, eos_token=EOS)
    hf.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}<start_of_turn>model\n"
    text = hf.decode(Gemma4ChatFormat(hf).prompt_ids("x = area(", ")\n", "python", 1024, CONTEXT))
    assert text.index("--- pkg/geometry.py ---\ndef area(") < text.index("--- pkg/units.py ---")
    assert text.index("--- pkg/units.py ---") < text.index(f"x = area({CURSOR_MARK})")
