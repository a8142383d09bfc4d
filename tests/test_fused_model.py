"""The fused layers compute what transformers' DiffusionGemma computes: the decoder step's logits and the
encoder prefill's hidden states and cached keys and values (within float rounding) on a random-weight
model of the released architecture (sliding and full attention layers, separate and shared values, MoE,
soft-capping) in fp32 and on the bundled bf16 model, with and without self-conditioning, over several
rows and prompts longer than the sliding window; and built from a checkpoint's files without transformers'
modeling module, as the server loads it, to the same numbers."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

from engine.api import InfillRequest
from engine.backbone import ModuleBackbone, backbone_of
from engine.checkpoint_weights import read_text_weights
from engine.forward import decoder_masks, denoise_logits, new_cache, softcap_
from engine.fused_config import FusedConfig
from engine.fused_model import FusedModel, _GatedLinear, _Linear, padded_rows, row_bucket, unsupported_reason
from engine.loading import text_config
from engine.rotary import RotaryTables
from evaluation.gpu_bench import TINY_TEXT
from training.shapes import _TINY_VISION

BUNDLED = Path(__file__).parent.parent / "engine" / "default"


def _onednn_bf16_missing() -> str:
    """Why oneDNN cannot run bf16 matmuls here ('' where it can): the check behind torch's error."""
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return ""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split("flags", 2)[1].splitlines()[0].split())
    except (OSError, IndexError):
        flags = set()
    lacking = [f for f in ("avx512bw", "avx512vl", "avx512dq", "avx_ne_convert") if f not in flags]
    need = "avx512bw, avx512vl and avx512dq or avx_ne_convert"
    return f"oneDNN's bf16 matmuls need {need}; this CPU lacks {', '.join(lacking) or 'them'}"


# The engine computes in bf16 only on a CPU with native bf16 (engine.loading.native_bf16): oneDNN runs it.
ONEDNN_BF16_MISSING = _onednn_bf16_missing()
needs_onednn_bf16 = pytest.mark.skipif(bool(ONEDNN_BF16_MISSING), reason=ONEDNN_BF16_MISSING)


def released_shape(tied: bool = True) -> DiffusionGemmaForBlockDiffusion:
    torch.manual_seed(0)
    text = dict(TINY_TEXT, final_logit_softcapping=30.0, tie_word_embeddings=tied)
    config = DiffusionGemmaConfig(
        text_config=text, vision_config=dict(_TINY_VISION), canvas_length=16, tie_word_embeddings=tied
    )
    return DiffusionGemmaForBlockDiffusion(config).eval()


def compare(model, prompt: int, canvas: int, rows: int, tolerance: float) -> None:
    vocab = model.config.get_text_config().vocab_size
    g = torch.Generator().manual_seed(prompt + canvas + rows)
    cache = new_cache(model)
    ModuleBackbone(model).encode(torch.randint(2, vocab, (1, prompt), generator=g), cache)
    if rows > 1:
        cache.batch_repeat_interleave(rows)
    tokens = torch.randint(2, vocab, (rows, canvas), generator=g)
    positions = torch.arange(prompt, prompt + canvas)[None]
    with torch.inference_mode():
        masks = decoder_masks(model, tokens, cache)
        first = denoise_logits(model, tokens, cache, positions, masks)
        second = denoise_logits(model, tokens, cache, positions, masks, first)
        step = FusedModel.of_module(model).canvas_step(cache, tokens, positions)
        assert (step(tokens) - first).abs().max() <= tolerance
        assert (step(tokens, first) - second).abs().max() <= tolerance
        again = step(tokens.flip(0), first.flip(0))  # a step reuses the canvas's buffers
        assert (
            again - denoise_logits(model, tokens.flip(0), cache, positions, masks, first.flip(0))
        ).abs().max() <= tolerance
        # Fusing leaves the model's own modules computing what they did.
        assert torch.equal(denoise_logits(model, tokens, cache, positions, masks, first), second)


@pytest.mark.parametrize(("prompt", "rows"), [(24, 1), (24, 3), (100, 2)])
def test_fused_step_matches_transformers_on_the_released_architecture(prompt, rows):
    compare(released_shape(), prompt, 16, rows, tolerance=1e-4)


def bundled_bf16_and_exact() -> tuple[DiffusionGemmaForBlockDiffusion, DiffusionGemmaForBlockDiffusion]:
    """The bundled model in bf16, and the same weights computing in fp32 (the arithmetic without rounding)."""
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(BUNDLED, dtype=torch.bfloat16).eval()
    return model, copy.deepcopy(model).float()


def assert_rounds_like_transformers(ours: torch.Tensor, theirs: torch.Tensor, exact: torch.Tensor) -> None:
    """In bf16 the fused layers round in other places than transformers' modules (oneDNN applies the gelu
    and the gate's product to fp32 sums, the experts' routing weights scale their hidden units before one
    matmul), so both are held to the fp32 arithmetic of the same weights: ours strays from it no more
    than transformers' own bf16 does (within 25%). Measured as the median over positions of each
    position's mean absolute error: where the router's top two experts are nearly tied, either
    implementation's rounding can flip the choice at a position and move its logits by ~1 (both did, on
    different prompts of the step-16,639 model), which a mean over all positions would count as rounding."""
    theirs_error = (theirs.float() - exact).abs().mean(dim=-1).median()
    assert (ours.float() - exact).abs().mean(dim=-1).median() <= 1.25 * theirs_error
    assert theirs_error > 0  # bf16 did round: the comparison measured something


@needs_onednn_bf16
@pytest.mark.parametrize(("canvas", "rows"), [(16, 1), (32, 3)])
def test_fused_step_rounds_bf16_no_worse_than_transformers_on_the_bundled_model(canvas, rows):
    # Over several prompts: on one small canvas a single expert choice that rounding flips (in either
    # implementation) moves the mean error by more than the rounding itself.
    model, exact = bundled_bf16_and_exact()
    fused = FusedModel.of_module(model)
    prompt = 200
    outputs: dict[str, list[torch.Tensor]] = {"ours": [], "theirs": [], "exact": []}
    for seed in range(3):
        g = torch.Generator().manual_seed(seed * 1000 + prompt + canvas + rows)
        ids = torch.randint(
            2, model.config.get_text_config().vocab_size, (1, prompt + rows * canvas), generator=g
        )
        tokens, positions = ids[0, prompt:].view(rows, canvas), torch.arange(prompt, prompt + canvas)[None]
        logits = {}
        with torch.inference_mode():
            for name, m in (("theirs", model), ("exact", exact)):
                cache = new_cache(m)
                ModuleBackbone(m).encode(ids[:, :prompt], cache)
                cache.batch_repeat_interleave(rows)
                masks = decoder_masks(m, tokens, cache)
                first = denoise_logits(m, tokens, cache, positions, masks)
                sc = (
                    logits["theirs"][0] if name == "exact" else first
                )  # both self-condition on the same logits
                logits[name] = (first, denoise_logits(m, tokens, cache, positions, masks, sc))
            cache = new_cache(model)
            ModuleBackbone(model).encode(ids[:, :prompt], cache)
            cache.batch_repeat_interleave(rows)
            step = fused.canvas_step(cache, tokens, positions)
            logits["ours"] = (step(tokens), step(tokens, logits["theirs"][0]))
        for name, pair in logits.items():
            outputs[name].append(torch.stack(pair))  # without and with self-conditioning
    ours, theirs, want = (torch.stack(outputs[name], dim=1) for name in ("ours", "theirs", "exact"))
    for got, their, exact_logits in zip(ours, theirs, want, strict=True):
        assert_rounds_like_transformers(got, their, exact_logits)


def compare_prefill(
    model, prompt: int, extension: int, rows: int, tolerance: float, fused: FusedModel | None = None
) -> None:
    """The encoder through the fused layers (by default built from `model`) against transformers'
    encoder: the same hidden states and the same cache, for a prompt and then `extension` more tokens
    on `rows` rows."""
    vocab = model.config.get_text_config().vocab_size
    g = torch.Generator().manual_seed(prompt + extension + rows)
    first = torch.randint(2, vocab, (1, prompt), generator=g)
    more = torch.randint(2, vocab, (rows, extension), generator=g)
    backbones = {"reference": ModuleBackbone(model), "fused": fused or FusedModel.of_module(model)}
    # Each arm with its own cache: transformers' DynamicCache, and the engine's KVCache the server uses.
    caches = {"reference": new_cache(model), "fused": backbones["fused"].new_cache()}
    with torch.inference_mode():
        hidden = {name: [backbones[name].encode(first, cache)] for name, cache in caches.items()}
        for name, cache in caches.items():
            if rows > 1:
                cache.batch_repeat_interleave(rows)
            if extension:
                hidden[name].append(backbones[name].encode(more, cache))
    for want, got in zip(hidden["reference"], hidden["fused"], strict=True):
        assert want.shape == got.shape and (want - got).abs().max() <= tolerance
    reference, ours = caches["reference"], caches["fused"]
    assert ours.get_seq_length() == reference.get_seq_length() == prompt + extension
    for want, got in zip(reference.layers, ours.layers, strict=True):
        assert want.keys.shape == got.keys.shape and (want.keys - got.keys).abs().max() <= tolerance
        assert (want.values - got.values).abs().max() <= tolerance


@pytest.mark.parametrize(
    ("prompt", "extension", "rows"),
    [(24, 0, 1), (100, 0, 1), (40, 30, 1), (24, 1, 1), (90, 1, 1), (40, 8, 2)],
)
def test_fused_prefill_matches_transformers_encoder(prompt, extension, rows):
    # 100 and 40 + 30 tokens pass the sliding window (64); one token is autoregressive decoding's step;
    # two rows extend a copied cache as a multi-canvas completion does.
    compare_prefill(released_shape(), prompt, extension, rows, tolerance=1e-4)


@needs_onednn_bf16
def test_fused_prefill_rounds_bf16_no_worse_than_transformers_on_the_bundled_model():
    model, exact = bundled_bf16_and_exact()
    ids = torch.randint(
        2, model.config.get_text_config().vocab_size, (1, 300), generator=torch.Generator().manual_seed(3)
    )
    backbones = {
        "ours": FusedModel.of_module(model),
        "theirs": ModuleBackbone(model),
        "exact": ModuleBackbone(exact),
    }
    caches = {name: new_cache(model) for name in backbones}
    with torch.inference_mode():
        hidden = {name: backbone.encode(ids, caches[name]) for name, backbone in backbones.items()}
    assert_rounds_like_transformers(hidden["ours"], hidden["theirs"], hidden["exact"])
    for ours, theirs, exact_layer in zip(
        *(caches[name].layers for name in ("ours", "theirs", "exact")), strict=True
    ):
        assert_rounds_like_transformers(ours.keys, theirs.keys, exact_layer.keys.float())
        assert_rounds_like_transformers(ours.values, theirs.values, exact_layer.values.float())


def test_the_engine_prefills_and_decodes_through_the_fused_layers_on_a_cpu(tiny_engine, monkeypatch):
    fused = tiny_engine.backbone
    assert isinstance(fused, FusedModel) and tiny_engine.prompt_cache.backbone is fused
    calls: list[str] = []
    real_encode, real_canvas_step = fused.encode, fused.canvas_step

    def encode(*args, **kwargs):  # spies: the fused layers still run
        calls.append("encode")
        return real_encode(*args, **kwargs)

    def canvas_step(*args, **kwargs):
        step = real_canvas_step(*args, **kwargs)

        def counted(*step_args, **step_kwargs):
            calls.append("step")
            return step(*step_args, **step_kwargs)

        return counted

    monkeypatch.setattr(fused, "encode", encode)
    monkeypatch.setattr(fused, "canvas_step", canvas_step)
    tiny_engine.reset_cache()
    request = InfillRequest(prefix="def add(a, b):\n    return ", suffix="\n", max_new_tokens=8, max_steps=2)
    result = tiny_engine.infill(request)
    assert calls[0] == "encode" and calls.count("step") == result.steps >= 1  # every step through them


def test_rotary_tables_are_the_models_own():
    # Sliding layers with default rope and full layers with proportional rope over a larger head, and
    # the bundled bf16 model: equal, not merely close.
    bundled = DiffusionGemmaForBlockDiffusion.from_pretrained(BUNDLED, dtype=torch.bfloat16)
    for model in (released_shape(), bundled):
        text = model.config.get_text_config()
        dtype = model.model.decoder.embed_tokens.weight.dtype
        ours = RotaryTables(FusedConfig.of(text).rotary)  # as fused_config.json holds them: Python floats
        positions = torch.arange(0, 3000, 7)[None]
        probe = torch.empty(0, dtype=dtype)
        for layer_type in set(text.layer_types):
            want = model.model.decoder.rotary_emb(probe, positions, layer_type)
            got = ours(positions, layer_type, dtype)
            assert all(torch.equal(w, g) for w, g in zip(want, got, strict=True))


def test_the_fused_layers_built_from_a_checkpoints_files_compute_what_transformers_does(tmp_path):
    # As the server loads a CPU checkpoint: the safetensors read directly (here sharded), no model object.
    # The encoder's layer scalars are buffers, not tied to the decoder's: made different here.
    model = released_shape()
    for index, (encoder, decoder) in enumerate(
        zip(model.model.encoder.language_model.layers, model.model.decoder.layers, strict=True)
    ):
        encoder.layer_scalar.fill_(0.5 + index)
        decoder.layer_scalar.fill_(2.0 - index / 4)
    model.save_pretrained(tmp_path, max_shard_size="300KB")
    assert len(list(tmp_path.glob("*.safetensors"))) > 1
    weights, parameters = read_text_weights(tmp_path, torch.float32)
    assert parameters == sum(p.numel() for p in model.parameters())
    text = text_config(json.loads((tmp_path / "config.json").read_text()))
    assert text.to_dict() == model.config.get_text_config().to_dict()
    fused = FusedModel(weights, text, 16, parameters)
    compare_prefill(model, 100, 8, 2, tolerance=1e-4, fused=fused)
    vocab = model.config.get_text_config().vocab_size
    cache = new_cache(model)
    fused.encode(torch.randint(2, vocab, (1, 40)), cache)
    cache.batch_repeat_interleave(2)
    tokens, positions = torch.randint(2, vocab, (2, 16)), torch.arange(40, 56)[None]
    with torch.inference_mode():
        want = denoise_logits(model, tokens, cache, positions, decoder_masks(model, tokens, cache))
        assert (fused.canvas_step(cache, tokens, positions)(tokens, None) - want).abs().max() <= 1e-4


def loaded_modules(folder: str) -> set[str]:
    """The modules a fresh process has imported once it has loaded `folder` on a CPU and completed once."""
    script = (
        "import json, sys; from engine.loading import load_engine; from engine import InfillRequest; "
        f"load_engine({folder!r}, device='cpu').infill(InfillRequest(prefix='x = ', max_new_tokens=4)); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_loading_the_bundled_model_on_a_cpu_imports_no_transformers():
    # transformers' import is about a second of a server's start: with the fused config saved beside
    # the weights, neither its config classes nor its cache are needed.
    assert not {m for m in loaded_modules("default") if m.split(".")[0] == "transformers"}


def test_without_a_fused_config_the_text_config_class_alone_is_imported(tmp_path):
    # Importing the model class, or the whole config (whose Gemma 4 vision half pulls in activations and
    # model loading), would cost more still; a checkpoint without fused_config.json needs the text config.
    for item in BUNDLED.iterdir():
        if item.name != "fused_config.json":
            (tmp_path / item.name).symlink_to(item)
    modules = loaded_modules(str(tmp_path))
    assert "transformers.models.diffusion_gemma.configuration_diffusion_gemma" in modules
    slow = {"transformers.models.diffusion_gemma.modeling_diffusion_gemma", "transformers.activations",
            "transformers.models.gemma4.configuration_gemma4", "transformers.core_model_loading"}  # fmt: skip
    assert not modules & slow


def test_a_finished_canvas_step_is_freed_at_once():
    # A reference cycle would keep each canvas's key and value buffers until the garbage collector
    # runs: measured, that made a 3-row step's setup 10x slower.
    model = released_shape()
    cache = new_cache(model)
    fused = FusedModel.of_module(model)
    fused.encode(torch.arange(2, 30)[None], cache)
    step = fused.canvas_step(cache, torch.zeros(3, 16, dtype=torch.long), torch.arange(28, 44)[None])
    step(torch.arange(2, 18).repeat(3, 1))
    freed = weakref.ref(step)
    del step
    assert freed() is None


def test_a_step_given_the_previous_probabilities_reads_them_for_self_conditioning():
    model = released_shape()
    cache = new_cache(model)
    fused = FusedModel.of_module(model)
    fused.encode(torch.arange(2, 30)[None], cache)
    tokens = torch.arange(2, 18)[None]
    step = fused.canvas_step(cache, tokens, torch.arange(28, 44)[None])
    previous = step(tokens, None).clone()
    own = step(tokens, previous).clone()
    # The same probabilities the step works out itself: the same logits, bit for bit.
    assert torch.equal(step(tokens, previous, probabilities=previous.softmax(dim=-1)), own)
    # Other probabilities than softmax(previous): they, and not the logits, are what the step reads.
    flat = torch.full_like(previous, 1.0 / previous.shape[-1])
    assert not torch.equal(step(tokens, previous, probabilities=flat), own)


def test_softcap_in_place_is_tanh_within_rounding():
    logits = torch.randn(4, 1000) * 40
    expected = torch.tanh(logits / 30.0) * 30.0
    assert (softcap_(logits.clone(), 30.0) - expected).abs().max() < 1e-4


def test_models_the_fused_step_does_not_cover_are_named():
    model = released_shape()
    text = model.config.get_text_config()
    assert unsupported_reason(text) is None
    assert isinstance(backbone_of(model), FusedModel)
    assert unsupported_reason(text, device="cuda").startswith("not on a CPU")
    text.use_clipped_linears = True
    assert unsupported_reason(text) == "clipped linears"
    with pytest.raises(ValueError, match="clipped linears"):
        FusedModel.of_module(model)
    assert isinstance(backbone_of(model), ModuleBackbone)
    text.use_clipped_linears = False
    text.rope_parameters["sliding_attention"]["rope_type"] = "dynamic"
    assert unsupported_reason(text) == "rope type dynamic on sliding_attention layers"


def test_a_head_not_tied_to_the_embedding_keeps_transformers_modules():
    model = released_shape(tied=False)
    assert model.lm_head.weight.data_ptr() != model.model.decoder.embed_tokens.weight.data_ptr()
    assert unsupported_reason(model.config.get_text_config(), model.config.tie_word_embeddings) == (
        "a head not tied to the embedding"
    )
    assert isinstance(backbone_of(model), ModuleBackbone)


def bundled_in(dtype: torch.dtype) -> DiffusionGemmaForBlockDiffusion:
    """The bundled model's bf16 weights computing in `dtype`, as `load_engine` runs them (fp32 on a CPU
    without native bf16)."""
    return DiffusionGemmaForBlockDiffusion.from_pretrained(BUNDLED, dtype=dtype).eval()


BUNDLED_DTYPES = [torch.float32, pytest.param(torch.bfloat16, marks=needs_onednn_bf16)]


@pytest.mark.parametrize("bundled_dtype", BUNDLED_DTYPES)
@pytest.mark.parametrize("rows", [1, 5, 16, 20, 48, 100])
def test_every_expert_at_once_computes_what_the_chosen_experts_do(rows, bundled_dtype):
    # A prompt's few rows run all experts in two matmuls, weighing the ones not chosen by zero: the
    # same numbers as running each chosen expert on its rows (in the bundled model's bf16, exactly, so
    # a prompt's keys and values do not depend on how its tokens were split between prefills).
    for model in (released_shape(), bundled_in(bundled_dtype)):
        layer = FusedModel.of_module(model).layers[-1]
        g = torch.Generator().manual_seed(rows)
        x, routed = (torch.randn(rows, layer.router_scale.shape[0], generator=g) for _ in range(2))
        dtype = model.model.decoder.embed_tokens.weight.dtype
        weights, index = layer.route(routed.to(dtype))
        chosen = layer.chosen_experts(x.to(dtype), weights, index)
        together = layer.all_experts(x.to(dtype), weights, index)
        if dtype == torch.bfloat16:  # the bundled model: the same numbers
            assert torch.equal(together, chosen)
        else:  # fp32 matmuls of other widths may round their sums differently: a few ulps of the outputs
            assert torch.allclose(together, chosen, rtol=1e-5, atol=1e-6 * chosen.abs().max().item())


@pytest.mark.parametrize(
    ("rows", "path"), [(1, "chosen_experts"), (16, "all_experts"), (100, "chosen_experts")]
)
def test_a_prompts_rows_take_the_cheaper_experts_path(rows, path, monkeypatch):
    # One row (a next-token step) reads two experts' weights, a few rows run all eight in two matmuls,
    # many rows the chosen ones again: the numbers are the same either way (the test above).
    layer = FusedModel.of_module(released_shape()).layers[-1]
    taken = []
    for name in ("chosen_experts", "all_experts", "canvas_experts"):
        real = getattr(layer, name)
        monkeypatch.setattr(layer, name, lambda *a, name=name, real=real: taken.append(name) or real(*a))
    x = torch.randn(rows, layer.router_scale.shape[0])
    layer.moe(x, x, canvas=False)
    assert taken == [path]


def expert_inputs(rows: int, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(rows)
    return torch.randn(rows, hidden, generator=g), torch.randn(rows, hidden, generator=g)


@pytest.mark.parametrize("rows", [1, 16, 48])
def test_a_canvas_runs_every_expert_in_fewer_matmuls_within_rounding(rows):
    # A canvas's keys and values are never cached, so its experts may round elsewhere (hidden units
    # weighed before one down projection over all experts): in fp32 the chosen experts' numbers, on the
    # random model and on the bundled weights as a CPU without native bf16 computes them.
    for model in (released_shape(), bundled_in(torch.float32)):
        layer = FusedModel.of_module(model).layers[-1]
        x, routed = expert_inputs(rows, layer.router_scale.shape[0])
        weights, index = layer.route(routed)
        canvas, chosen = layer.canvas_experts(x, weights, index), layer.chosen_experts(x, weights, index)
        assert torch.allclose(canvas, chosen, rtol=1e-5, atol=1e-6)


@needs_onednn_bf16
@pytest.mark.parametrize("rows", [1, 16, 48])
def test_a_canvas_rounds_bf16_no_further_than_the_chosen_experts(rows):
    # In bf16 a canvas's experts stray from the fp32 arithmetic no further than the chosen experts' own.
    bundled, exact = bundled_bf16_and_exact()
    layer, exact_layer = (FusedModel.of_module(model).layers[-1] for model in (bundled, exact))
    x, routed = (t.bfloat16() for t in expert_inputs(rows, layer.router_scale.shape[0]))
    weights, index = layer.route(routed)
    exact = exact_layer.chosen_experts(x.float(), weights, index)
    ours = layer.canvas_experts(x, weights, index)
    assert_rounds_like_transformers(ours, layer.chosen_experts(x, weights, index), exact)


def test_row_buckets_bound_the_shapes_a_matmul_runs_at():
    # oneDNN caches a kernel per row count: a server's varied counts (new prompt tokens, each expert's
    # share) must come down to a few, with little padding.
    buckets = {n: row_bucket(n) for n in range(1, 4097)}
    assert all(n <= b and row_bucket(b) == b for n, b in buckets.items())
    assert all(b <= 16 or b - n < 16 for n, b in buckets.items() if n <= 128)
    assert all(b <= 1.25 * n for n, b in buckets.items() if n > 128)
    assert len(set(buckets.values())) <= 45
    assert [row_bucket(n) for n in (1, 2, 3, 16, 17, 129)] == [1, 2, 4, 16, 32, 160]


@needs_onednn_bf16
@pytest.mark.parametrize("rows", [3, 17, 33, 130])
def test_a_matmuls_rows_do_not_depend_on_the_zero_rows_padding_them(rows):
    # The bundled model's bf16 weights, packed for oneDNN: padded to its bucket, a matmul gives the rows
    # it was asked for, the numbers of oneDNN over exactly those rows (a kernel for another row count
    # may round a sum to the neighbouring bf16 value, as before buckets).
    bundled = DiffusionGemmaForBlockDiffusion.from_pretrained(BUNDLED, dtype=torch.bfloat16)
    weight = bundled.model.decoder.layers[0].mlp.down_proj.weight
    linear = _Linear(weight)
    x = torch.randn(rows, weight.shape[1], generator=torch.Generator().manual_seed(rows)).bfloat16()
    assert linear.packed is not None
    exact = torch.ops.mkldnn._linear_pointwise(x, linear.packed, None, "none", [], "")
    assert row_bucket(rows) > rows
    assert torch.allclose(linear(x).float(), exact.float(), rtol=2**-7, atol=0)


@pytest.mark.parametrize("rows", [3, 17, 33, 130])
def test_fp32_rows_do_not_depend_on_the_zero_rows_padding_them(rows):
    # In fp32 (the engine's dtype on a CPU without native bf16) the plain weight serves every call, and
    # every expert at once pads its rows to the bucket as well: the rows asked for, within fp32 rounding.
    weight = bundled_in(torch.float32).model.decoder.layers[0].mlp.down_proj.weight
    linear = _Linear(weight)
    assert linear.packed is None and linear.single is None  # no other copy of an fp32 weight
    x = torch.randn(rows, weight.shape[1], generator=torch.Generator().manual_seed(rows))
    padded, asked = padded_rows(x)
    assert asked == rows < padded.shape[0] == row_bucket(rows) and not padded[rows:].any()
    assert torch.allclose(linear(padded)[:rows], F.linear(x, weight), rtol=1e-5, atol=1e-6)


@needs_onednn_bf16
def test_a_single_row_through_fp32_blas_is_onednns_arithmetic():
    # One row (a next-token step) runs through an fp32 copy of the weight: bf16 products are exact in
    # fp32 and oneDNN sums them in fp32 too, so only the order of the sums differs (a bf16 rounding).
    bundled = DiffusionGemmaForBlockDiffusion.from_pretrained(BUNDLED, dtype=torch.bfloat16)
    mlp = bundled.model.decoder.layers[0].mlp
    linear = _Linear(mlp.down_proj.weight, single_rows=True)
    gated = _GatedLinear(mlp.gate_proj.weight, mlp.up_proj.weight, single_rows=True)
    assert linear.packed is not None
    g = torch.Generator().manual_seed(0)
    row = torch.randn(1, 1, mlp.down_proj.weight.shape[1], generator=g).bfloat16()
    onednn = torch.ops.mkldnn._linear_pointwise(row[0], linear.packed, None, "none", [], "")
    assert linear(row).shape == (1, 1, linear.out_features)
    assert torch.allclose(linear(row)[0].float(), onednn.float(), rtol=2**-7, atol=0)
    x = torch.randn(1, mlp.gate_proj.weight.shape[1], generator=g).bfloat16()
    gate = torch.ops.mkldnn._linear_pointwise(x, gated.gate.packed, None, "gelu", [], "tanh")
    both = torch.ops.mkldnn._linear_pointwise.binary(x, gate, gated.up.packed, None, "mul")
    assert torch.allclose(gated(x).float(), both.float(), rtol=2**-7, atol=0)
    two_rows = torch.cat([x, x])  # more rows take oneDNN's path
    assert torch.equal(gated(two_rows)[1], both[0])


@pytest.mark.parametrize("bundled_dtype", BUNDLED_DTYPES)
def test_a_narrow_weight_goes_through_fp32_blas_at_any_row_count(bundled_dtype):
    # The router's 8 outputs: BLAS on the fp32 copy beats oneDNN's fixed cost per call at every row count,
    # with oneDNN's arithmetic (bf16 products summed in fp32, rounded once); an fp32 weight is that copy.
    weight = bundled_in(bundled_dtype).model.decoder.layers[0].router.proj.weight
    router = _Linear(weight, narrow=True)
    g = torch.Generator().manual_seed(1)
    if bundled_dtype == torch.float32:
        assert router.packed is None and router.single is None  # the weight itself, no copy
        for rows in (1, 16, 48):
            x = torch.randn(rows, weight.shape[1], generator=g)
            assert torch.equal(router(x), F.linear(x, weight))
        return
    assert router.packed is not None and router.single is not None
    for rows in (1, 16, 48):
        x = torch.randn(rows, weight.shape[1], generator=g).bfloat16()
        onednn = torch.ops.mkldnn._linear_pointwise(x, router.packed, None, "none", [], "")
        assert torch.allclose(router(x).float(), onednn.float(), rtol=2**-7, atol=0)
        assert torch.equal(router(x), F.linear(x.float(), weight.float()).to(torch.bfloat16))
