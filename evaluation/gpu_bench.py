"""`python -m evaluation.gpu_bench`: DiffusionGemma 26B-A4B speed on one GPU, random weights, bf16.

Builds the released model's shape (values of google/diffusiongemma-26B-A4B-it's Gemma 4 26B-A4B text
config as quoted in public code: 30 layers, hidden 2816, 128 experts with 8 active, vocab 262,144;
about 25.2B parameters, 3.8B active) and measures, in one run:
- encoder prefill, tokens/s;
- a 256-token canvas at fixed 12, 24 and 48 denoising steps with our loop (`engine.sampler.denoise`)
  and with transformers' `generate` (early stopping disabled: random weights never converge);
- autoregressive decoding of the same weights at batch 1 (the encoder as a causal LM, KV cache).
Prints one table and writes JSON. `--tiny` runs the same code on a tiny config on CPU (the test).
Published anchors: 1,000+ tokens/s on one H100; 1,107 vs 303 tokens/s against autoregressive Gemma 4.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, DynamicCache

from engine.backbone import ModuleBackbone
from engine.sampler import CanvasSpec, SamplerSettings, denoise, noise_canvas, suppression_bias
from training.shapes import _TINY_VISION

STEP_COUNTS = (12, 24, 48)

RELEASED_TEXT = dict(
    vocab_size=262_144,
    hidden_size=2816,
    intermediate_size=2112,
    moe_intermediate_size=704,
    num_experts=128,
    top_k_experts=8,
    num_hidden_layers=30,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=256,
    global_head_dim=512,
    num_global_key_value_heads=2,
    sliding_window=1024,
    layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 5,
    max_position_embeddings=262_144,
    final_logit_softcapping=30.0,
)

TINY_TEXT = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=32,
    num_experts=4,
    top_k_experts=2,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    global_head_dim=32,
    sliding_window=64,
    layer_types=["sliding_attention", "full_attention"],
    max_position_embeddings=4096,
)


@dataclass
class Figures:
    device: str
    dtype: str
    parameters_b: float
    active_parameters_b: float
    prompt_tokens: int
    canvas: int
    prefill_tokens_per_s: float
    ours_tokens_per_s: dict[int, float]
    generate_tokens_per_s: dict[int, float]
    autoregressive_tokens_per_s: float
    build_s: float


def build(tiny: bool, device: str, dtype: torch.dtype) -> DiffusionGemmaForBlockDiffusion:
    text = TINY_TEXT if tiny else RELEASED_TEXT
    config = DiffusionGemmaConfig(text_config=dict(text), vision_config=dict(_TINY_VISION), canvas_length=256)
    # Built directly in the target dtype on the target device: 25B parameters in fp32 would not fit
    # next to their bf16 copy on one 141 GB GPU.
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = DiffusionGemmaForBlockDiffusion(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def active_parameters(model: DiffusionGemmaForBlockDiffusion) -> float:
    text = model.config.get_text_config()
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    return total - experts * (1 - text.top_k_experts / text.num_experts)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@torch.inference_mode()
def prefill(model, prompt: torch.Tensor, device: str) -> tuple[DynamicCache, float]:
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    sync(device)
    start = time.perf_counter()
    model.model.encoder(input_ids=prompt, cache=cache)
    sync(device)
    return cache, prompt.shape[1] / (time.perf_counter() - start)


def ours(model, cache, steps: int, device: str) -> float:
    vocab = model.config.get_text_config().vocab_size
    generator = torch.Generator(device=device).manual_seed(0)
    spec = CanvasSpec(
        init=noise_canvas(1, 256, vocab, generator),
        fixed=torch.zeros(1, 256, dtype=torch.bool, device=device),
    )
    # A confidence threshold no random model reaches: every run takes exactly `steps` steps.
    settings = SamplerSettings(max_steps=steps, confidence_threshold=1e-12)
    bias = suppression_bias(vocab, (), torch.device(device))
    eos = torch.tensor([1], device=device)
    sync(device)
    start = time.perf_counter()
    outcome = denoise(ModuleBackbone(model), cache, spec, settings, bias, eos, generator)
    sync(device)
    assert outcome.steps == steps
    return 256 / (time.perf_counter() - start)


@torch.inference_mode()
def generate(model, prompt: torch.Tensor, steps: int, device: str, prefill_s: float) -> float:
    sync(device)
    start = time.perf_counter()
    model.generate(
        prompt,
        max_new_tokens=256,
        max_denoising_steps=steps,
        confidence_threshold=1e-12,
        stability_threshold=1,
    )
    sync(device)
    # generate re-encodes the prompt; take its prefill out so both loops are compared on the canvas alone.
    return 256 / max(time.perf_counter() - start - prefill_s, 1e-9)


@torch.inference_mode()
def autoregressive(model, cache: DynamicCache, last: torch.Tensor, tokens: int, device: str) -> float:
    cap = model.config.get_text_config().final_logit_softcapping
    token = last
    sync(device)
    start = time.perf_counter()
    for _ in range(tokens):
        hidden = model.model.encoder(input_ids=token, cache=cache).last_hidden_state
        logits = model.lm_head(hidden[:, -1]).float()
        logits = torch.tanh(logits / cap) * cap
        token = logits.argmax(dim=-1, keepdim=True)
    sync(device)
    return tokens / (time.perf_counter() - start)


def run(tiny: bool, device: str, prompt_tokens: int, ar_tokens: int) -> Figures:
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    started = time.perf_counter()
    model = build(tiny, device, dtype)
    build_s = time.perf_counter() - started
    vocab = model.config.get_text_config().vocab_size
    prompt = torch.randint(2, vocab, (1, prompt_tokens), device=device)
    prefill(model, prompt[:, :64], device)  # warm-up (kernels, allocator)
    cache, prefill_tps = prefill(model, prompt, device)
    prefill_s = prompt_tokens / prefill_tps
    ours(model, cache, 2, device)  # warm-up
    ours_tps = {steps: ours(model, cache, steps, device) for steps in STEP_COUNTS}
    generate_tps = {steps: generate(model, prompt, steps, device, prefill_s) for steps in STEP_COUNTS}
    ar_tps = autoregressive(model, cache, prompt[:, -1:], ar_tokens, device)
    return Figures(
        device=torch.cuda.get_device_name(0) if device.startswith("cuda") else device,
        dtype=str(dtype).removeprefix("torch."),
        parameters_b=sum(p.numel() for p in model.parameters()) / 1e9,
        active_parameters_b=active_parameters(model) / 1e9,
        prompt_tokens=prompt_tokens,
        canvas=256,
        prefill_tokens_per_s=prefill_tps,
        ours_tokens_per_s=ours_tps,
        generate_tokens_per_s=generate_tps,
        autoregressive_tokens_per_s=ar_tps,
        build_s=build_s,
    )


def table(f: Figures) -> str:
    lines = [
        f"DiffusionGemma {f.parameters_b:.1f}B ({f.active_parameters_b:.2f}B active), {f.dtype}, {f.device}",
        f"prefill ({f.prompt_tokens} tokens): {f.prefill_tokens_per_s:,.0f} tokens/s",
        "steps  ours tok/s  generate tok/s  ours vs autoregressive",
    ]
    for steps in STEP_COUNTS:
        ours_tps, gen_tps = f.ours_tokens_per_s[steps], f.generate_tokens_per_s[steps]
        ratio = ours_tps / f.autoregressive_tokens_per_s
        lines.append(f"{steps:>5}  {ours_tps:>10,.0f}  {gen_tps:>14,.0f}  {ratio:>21.2f}x")
    lines.append(f"autoregressive, batch 1: {f.autoregressive_tokens_per_s:,.1f} tokens/s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.gpu_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--tiny", action="store_true", help="a tiny config on CPU: checks the script end to end"
    )
    parser.add_argument("--device", default=None, help="default: cuda, or cpu with --tiny")
    parser.add_argument("--prompt-tokens", type=int, default=2048)
    parser.add_argument("--ar-tokens", type=int, default=256)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    device = args.device or ("cpu" if args.tiny else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA device: run with --tiny on CPU, or on a GPU machine")
    figures = run(args.tiny, device, args.prompt_tokens, args.ar_tokens)
    print(table(figures))
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
