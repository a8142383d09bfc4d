"""`python -m evaluation.gpu_bench`: DiffusionGemma 26B-A4B speed on one GPU, random weights, bf16.

Builds the released model's shape (values of google/diffusiongemma-26B-A4B-it's Gemma 4 26B-A4B text
config as quoted in public code: 30 layers, hidden 2816, 128 experts with 8 active, vocab 262,144;
about 25.2B parameters, 3.8B active) and runs each path on the same prompt ids:
- ours: encoder prefill, then one canvas denoised by our loop (`engine.sampler.denoise`) at fixed
  12, 24 and 48 steps;
- transformers' `generate` on the same canvas and steps (early stopping disabled: random weights
  never converge);
- autoregressive decoding of the same weights at batch 1 (the encoder as a causal LM, KV cache);
- with `--vllm URL`, a vLLM serving DiffusionGemma: the same prompt ids, one canvas, the same steps
  (`diffusion_max_steps`, `diffusion_read_only`).
Every path is timed the same way, from the prompt's ids to its output (synchronized), after a warm-up,
`--repeats` times: the table gives the median and the spread (min-max) of the time, the tokens each
path returned, and tokens per second with the prefill and without it (the path's own prefill where it
runs one we can time, else the prefill median of ours: the same encoder over the same prompt; vLLM's
is not separable from the outside and is left out). `--tiny` runs the same code on a tiny config on CPU.
Published anchors: 1,000+ tokens/s on one H100; 1,107 vs 303 tokens/s against autoregressive Gemma 4.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
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


@dataclass(frozen=True)
class Sample:
    """One timed run of a path: wall time from the prompt's ids to its output, and what it returned."""

    seconds: float
    tokens: int
    prefill_seconds: float | None = None  # the part spent encoding the prompt, where the path shows it


@dataclass(frozen=True)
class PathFigures:
    """A path's runs at one setting: medians and spread."""

    path: str
    steps: int | None  # denoising steps (None: autoregressive)
    runs: int
    tokens: int  # the median of the tokens each run returned
    median_ms: float
    min_ms: float
    max_ms: float
    tokens_per_s: float  # prefill included
    tokens_per_s_no_prefill: float | None  # None: the prefill could not be taken out
    prefill_ms: float | None


@dataclass
class Figures:
    device: str
    dtype: str
    parameters_b: float
    active_parameters_b: float
    prompt_tokens: int
    canvas: int
    repeats: int
    prefill_tokens_per_s: float
    paths: list[PathFigures]
    build_s: float


def build(tiny: bool, device: str, dtype: torch.dtype, canvas: int = 256) -> DiffusionGemmaForBlockDiffusion:
    text = TINY_TEXT if tiny else RELEASED_TEXT
    config = DiffusionGemmaConfig(
        text_config=dict(text), vision_config=dict(_TINY_VISION), canvas_length=canvas
    )
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


def timed(device: str, work: Callable[[], Sample]) -> Sample:
    """`work` timed from its start to its output on the device (synchronized before both clock reads)."""
    sync(device)
    start = time.perf_counter()
    done = work()
    sync(device)
    return Sample(time.perf_counter() - start, done.tokens, done.prefill_seconds)


@torch.inference_mode()
def encode(model, prompt: torch.Tensor, device: str) -> tuple[DynamicCache, float]:
    """The prompt into a fresh cache, and the seconds it took (synchronized)."""
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    sync(device)
    start = time.perf_counter()
    model.model.encoder(input_ids=prompt, cache=cache)
    sync(device)
    return cache, time.perf_counter() - start


@torch.inference_mode()
def ours(model, prompt: torch.Tensor, steps: int, canvas: int, device: str) -> Sample:
    """Prefill, then one canvas denoised by our loop for exactly `steps` steps."""
    cache, prefill_s = encode(model, prompt, device)
    vocab = model.config.get_text_config().vocab_size
    generator = torch.Generator(device=device).manual_seed(0)
    spec = CanvasSpec(
        init=noise_canvas(1, canvas, vocab, generator),
        fixed=torch.zeros(1, canvas, dtype=torch.bool, device=device),
    )
    # A confidence threshold no random model reaches: every run takes exactly `steps` steps.
    settings = SamplerSettings(max_steps=steps, confidence_threshold=1e-12)
    bias = suppression_bias(vocab, (), torch.device(device))
    no_eos = torch.tensor([], dtype=torch.long, device=device)  # as generate, which has none here
    outcome = denoise(ModuleBackbone(model), cache, spec, settings, bias, no_eos, generator)
    if outcome.steps != steps:
        raise RuntimeError(f"our loop ran {outcome.steps} steps, not {steps}")
    return Sample(0.0, int(outcome.tokens.shape[1]), prefill_s)


@torch.inference_mode()
def generate(model, prompt: torch.Tensor, steps: int, canvas: int, device: str) -> Sample:
    """transformers' generate for one canvas at exactly `steps` steps (its prefill inside)."""
    out = model.generate(
        prompt,
        max_new_tokens=canvas,
        max_denoising_steps=steps,
        confidence_threshold=1e-12,
        stability_threshold=1,
    )
    sequences = out.sequences if hasattr(out, "sequences") else out
    return Sample(0.0, int(sequences.shape[1] - prompt.shape[1]))


@torch.inference_mode()
def autoregressive(model, prompt: torch.Tensor, tokens: int, device: str) -> Sample:
    """Prefill, then greedy decoding one token per forward pass, `tokens` of them."""
    cache, prefill_s = encode(model, prompt[:, :-1], device)
    cap = model.config.get_text_config().final_logit_softcapping
    token, written = prompt[:, -1:], 0
    for _ in range(tokens):
        hidden = model.model.encoder(input_ids=token, cache=cache).last_hidden_state
        logits = model.lm_head(hidden[:, -1]).float()
        if cap:
            logits = torch.tanh(logits / cap) * cap
        token = logits.argmax(dim=-1, keepdim=True)
        written += 1
    return Sample(0.0, written, prefill_s)


def served(url: str, prompt: torch.Tensor, steps: int, canvas: int, vocab: int) -> Callable[[], Sample]:
    """A run against a vLLM serving DiffusionGemma: the same prompt ids, one canvas, `steps` steps."""
    from engine.remote_http import Call, HttpClient, server_base
    from engine.remote_server import probe
    from engine.remote_settings import RemoteSettings

    client = HttpClient(server_base(url), RemoteSettings().key(), timeout_s=600)
    facts = probe(client, RemoteSettings())
    if not facts.extras or facts.vocab_size != vocab or facts.canvas < canvas:
        client.close()
        raise SystemExit(
            f"{url} serves {facts.model} (vocabulary {facts.vocab_size}, canvas {facts.canvas}, extras "
            f"{facts.extras}): serve DiffusionGemma with vocabulary {vocab} and a canvas of {canvas} or more"
        )
    xargs = {"diffusion_max_steps": steps, "diffusion_read_only": 1}
    if canvas < facts.canvas:
        xargs["diffusion_canvas_length"] = canvas
    body = {"model": facts.model, "prompt": prompt[0].tolist(), "max_tokens": canvas, "vllm_xargs": xargs}

    def run() -> Sample:
        answer = client.call(Call("/v1/completions", body))
        return Sample(0.0, int(answer["usage"]["completion_tokens"]))

    return run


def measure(
    name: str, steps: int | None, work: Callable[[], Sample], device: str, repeats: int, prefill_s: float
) -> PathFigures:
    """One warm-up run, then `repeats` timed ones: medians and spread; without the prefill, each run's
    own where it timed one, else `prefill_s` (NaN: leave it out)."""
    timed(device, work)
    samples = [timed(device, work) for _ in range(repeats)]
    seconds = [s.seconds for s in samples]
    median_s = statistics.median(seconds)
    tokens = int(statistics.median(s.tokens for s in samples))
    own = [s.prefill_seconds for s in samples if s.prefill_seconds is not None]
    prefill = statistics.median(own) if own else prefill_s
    rest = median_s - prefill if prefill == prefill else float("nan")
    return PathFigures(
        path=name,
        steps=steps,
        runs=repeats,
        tokens=tokens,
        median_ms=median_s * 1000,
        min_ms=min(seconds) * 1000,
        max_ms=max(seconds) * 1000,
        tokens_per_s=tokens / median_s,
        tokens_per_s_no_prefill=tokens / rest if rest > 0 else None,
        prefill_ms=prefill * 1000 if prefill == prefill else None,
    )


def run(
    tiny: bool,
    device: str,
    prompt_tokens: int,
    ar_tokens: int,
    repeats: int = 5,
    steps: tuple[int, ...] = STEP_COUNTS,
    canvas: int = 256,
    vllm: str | None = None,
) -> Figures:
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    started = time.perf_counter()
    model = build(tiny, device, dtype, canvas)  # generate writes whole canvases: one is the request
    build_s = time.perf_counter() - started
    vocab = model.config.get_text_config().vocab_size
    prompt = torch.randint(2, vocab, (1, prompt_tokens), device=device, generator=None)
    encode(model, prompt[:, :64], device)  # warm-up (kernels, allocator)
    prefills = sorted(encode(model, prompt, device)[1] for _ in range(max(3, repeats)))
    prefill_s = statistics.median(prefills)
    paths: list[PathFigures] = []
    for count in steps:
        paths.append(measure("ours", count, lambda c=count: ours(model, prompt, c, canvas, device), device,
                             repeats, prefill_s))  # fmt: skip
        paths.append(measure("generate", count, lambda c=count: generate(model, prompt, c, canvas, device),
                             device, repeats, prefill_s))  # fmt: skip
        if vllm:
            paths.append(measure("vllm", count, served(vllm, prompt, count, canvas, vocab), device, repeats,
                                 float("nan")))  # fmt: skip
    paths.append(measure("autoregressive", None, lambda: autoregressive(model, prompt, ar_tokens, device),
                         device, repeats, prefill_s))  # fmt: skip
    return Figures(
        device=torch.cuda.get_device_name(0) if device.startswith("cuda") else device,
        dtype=str(dtype).removeprefix("torch."),
        parameters_b=sum(p.numel() for p in model.parameters()) / 1e9,
        active_parameters_b=active_parameters(model) / 1e9,
        prompt_tokens=prompt_tokens,
        canvas=canvas,
        repeats=repeats,
        prefill_tokens_per_s=prompt_tokens / prefill_s,
        paths=paths,
        build_s=build_s,
    )


def table(f: Figures) -> str:
    lines = [
        f"DiffusionGemma {f.parameters_b:.1f}B ({f.active_parameters_b:.2f}B active), {f.dtype}, {f.device}",
        f"prompt {f.prompt_tokens} tokens, canvas {f.canvas}, {f.repeats} runs per row after a warm-up",
        f"prefill: {f.prefill_tokens_per_s:,.0f} tokens/s",
        "path            steps  tokens  ms median [min-max]      tok/s  tok/s without prefill",
    ]
    for p in f.paths:
        no_prefill = f"{p.tokens_per_s_no_prefill:>10,.1f}" if p.tokens_per_s_no_prefill else "       n/a"
        spread = f"{p.median_ms:,.1f} [{p.min_ms:,.1f}-{p.max_ms:,.1f}]"
        steps = str(p.steps) if p.steps is not None else "-"
        lines.append(
            f"{p.path:<15} {steps:>5}  {p.tokens:>6}  {spread:<24} {p.tokens_per_s:>7,.1f}  {no_prefill}"
        )
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
    parser.add_argument("--canvas", type=int, default=256)
    parser.add_argument(
        "--steps", default=",".join(map(str, STEP_COUNTS)), help="comma-separated step counts"
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per row, after one warm-up run")
    parser.add_argument("--vllm", metavar="URL", help="also a vLLM serving DiffusionGemma of the same shape")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    device = args.device or ("cpu" if args.tiny else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA device: run with --tiny on CPU, or on a GPU machine")
    steps = tuple(int(s) for s in args.steps.split(","))
    torch.manual_seed(0)  # the same prompt ids in every run
    figures = run(
        args.tiny, device, args.prompt_tokens, args.ar_tokens, args.repeats, steps, args.canvas, args.vllm
    )
    print(table(figures))
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
