"""Distillation targets: the model's own greedy continuation, batched as training batches are."""

from __future__ import annotations

import torch
from transformers import DiffusionGemmaForBlockDiffusion

from engine import InfillRequest
from engine.forward import encode, lm_logits, new_cache
from training.data import Example
from training.distill import greedy_targets
from training.objective import canvas_rows, collate


def test_distilled_targets_are_each_prompts_greedy_continuation_in_a_left_padded_batch(
    tiny_model_dir, tiny_engine
):
    # The reference is the same fp32 model read without a cache or padding: each token is the head's
    # argmax after the prompt and the tokens before it. (The engine's bf16 layers flip near-ties of this
    # random model's flat logits, so they are not the reference here.)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    length, eos = 10, model.config.get_text_config().eos_token_id
    suppressed = tiny_engine.format.suppressed_ids
    prompts = [
        tiny_engine.prompt_ids(
            InfillRequest(prefix="def add(a, b):\n    return ", suffix="\n\nprint(add(1, 2))\n")
        ),
        tiny_engine.prompt_ids(InfillRequest(prefix="import os\n\nx = ")),
    ]
    assert len(prompts[0]) != len(prompts[1])  # one row is padded on the left, as training's are
    width = max(map(len, prompts))
    ids = torch.zeros(2, width, dtype=torch.long)
    mask = torch.zeros(2, width, dtype=torch.bool)
    positions = torch.zeros(2, width, dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt)
        mask[row, width - len(prompt) :] = True
        positions[row, width - len(prompt) :] = torch.arange(len(prompt))
    canvas_positions = torch.stack([torch.arange(len(p), len(p) + length) for p in prompts])
    out = greedy_targets(model, ids, mask, positions, canvas_positions, eos, suppressed)
    assert out.shape == (2, length)

    banned = torch.zeros(model.config.get_text_config().vocab_size)
    banned[list(suppressed)] = float("-inf")
    for row, prompt in enumerate(prompts):
        written = out[row].tolist()
        with torch.no_grad():
            hidden = encode(model, torch.tensor([prompt + written[:-1]]), new_cache(model))[
                0, len(prompt) - 1 :
            ]
            reference = (lm_logits(model, hidden) + banned).argmax(dim=-1).tolist()
        ended = written.index(eos) if eos in written else length
        assert written[: ended + 1] == reference[: ended + 1]
        assert all(token == eos for token in written[ended:])  # EOS, then the EOS fill
        assert not set(written) & set(suppressed)

    # A row ends at its first EOS and is filled with EOS after it, while the other row writes on: the
    # token row 1 wrote fourth plays EOS (the random model seldom writes its real one).
    stop = int(out[1, 3])
    ended = greedy_targets(model, ids, mask, positions, canvas_positions, stop, suppressed)
    first = out[1].tolist().index(stop)
    assert ended[1].tolist() == out[1, : first + 1].tolist() + [stop] * (length - first - 1)
    if stop not in out[0].tolist():
        assert ended[0].tolist() == out[0].tolist()


def test_a_distilled_batch_keeps_the_real_middle_where_a_lookup_draft_starts_the_canvas(
    tiny_model_dir, tiny_engine
):
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    fmt, canvas = tiny_engine.format, 8
    eos = fmt.special.eos

    def example(prefix: str, middle: str, draft: str | None) -> Example:
        tokens = (fmt.encode(middle) + [eos] * canvas)[:canvas]
        drafted = (fmt.encode(draft) + [eos] * canvas)[:canvas] if draft else None
        prompt = fmt.layout(fmt.encode(prefix), [], "python")
        return Example(prompt=prompt, target=tokens, middle_rest=fmt.encode(middle) + [eos], draft=drafted)

    rows = [
        example("def add(a, b):\n    return ", "a + b", None),
        example("x = compute(1)\ny = ", "compute(2)", "compute(1)"),
    ]
    batch = collate(rows, fmt.special.pad)
    real_target, real_start = canvas_rows(model, batch, "cpu")
    assert torch.equal(real_target, batch.target) and torch.equal(real_start[1], batch.draft[1])

    batch.distill_suppressed = fmt.suppressed_ids
    target, start = canvas_rows(model, batch, "cpu")
    width = batch.prompt_width
    greedy = greedy_targets(
        model, batch.encoder_ids[:, :width], batch.encoder_mask[:, :width], batch.positions[:, :width],
        batch.decoder_positions, model.config.get_text_config().eos_token_id, fmt.suppressed_ids,
    )  # fmt: skip
    assert torch.equal(target[0], greedy[0])
    assert torch.equal(start[0], greedy[0])  # noised from its own target
    assert not torch.equal(greedy[0], batch.target[0])  # the random model does not write the real middle
    assert torch.equal(target[1], batch.target[1]) and torch.equal(start[1], batch.draft[1])
