"""Named shapes for our own DiffusionGemma-architecture models, and their transformers config."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from transformers import DiffusionGemmaConfig


@dataclass(frozen=True)
class ModelShape:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    num_experts: int
    top_k_experts: int
    moe_intermediate_size: int
    canvas_length: int
    max_positions: int = 4096


# The bundled CPU model: ~11M parameters, ~4M active per token, canvas 32.
_SMALL = ModelShape(
    vocab_size=8192,
    hidden_size=256,
    num_layers=4,
    num_heads=4,
    num_kv_heads=1,
    head_dim=64,
    intermediate_size=512,
    num_experts=8,
    top_k_experts=2,
    moe_intermediate_size=256,
    canvas_length=32,
)

_TINY = ModelShape(
    vocab_size=512,
    hidden_size=64,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    head_dim=32,
    intermediate_size=128,
    num_experts=4,
    top_k_experts=2,
    moe_intermediate_size=64,
    canvas_length=16,
    max_positions=2048,
)

SHAPES: dict[str, ModelShape] = {
    # Test-only: random weights in well under a second, a few hundred KB; "tiny-l3" is it grown a layer.
    "tiny": _TINY,
    "tiny-l3": replace(_TINY, num_layers=3),
    "small": _SMALL,
    # Ablations of "small" at about its active parameters: two experts instead of eight (the expert
    # loop costs wall-clock time on a CPU), and deep-and-thin (MobileLLM) with two small experts.
    "small-e2": replace(_SMALL, num_experts=2),
    "deep8": replace(_SMALL, num_layers=8, intermediate_size=256, num_experts=2, moe_intermediate_size=128),
    # "small" with a 4,096-token vocabulary: the tied head and embedding are a third of its FLOPs.
    "small-v4k": replace(_SMALL, vocab_size=4096),
    # "small" six layers deep: grown from a "small" model (`training/growth.py`), a capacity step.
    "small-l6": replace(_SMALL, num_layers=6),
    # For a lent GPU: ~30M parameters, still small enough to ship in bf16 under 60 MB.
    "base": ModelShape(
        vocab_size=8192,
        hidden_size=384,
        num_layers=6,
        num_heads=6,
        num_kv_heads=2,
        head_dim=64,
        intermediate_size=1024,
        num_experts=8,
        top_k_experts=2,
        moe_intermediate_size=384,
        canvas_length=32,
    ),
}

# A vision tower of a few KB: DiffusionGemma always builds one, and the default adds ~167M parameters.
_TINY_VISION = dict(
    model_type="gemma4_vision",
    hidden_size=8,
    intermediate_size=8,
    num_hidden_layers=1,
    num_attention_heads=1,
    num_key_value_heads=1,
    head_dim=8,
    position_embedding_size=16,
    patch_size=2,
    pooling_kernel_size=1,
)


def diffusion_gemma_config(shape: ModelShape, special: dict[str, int]) -> DiffusionGemmaConfig:
    """The transformers config of a shape; `special` maps pad/eos/bos/image/boi/eoi to the tokenizer's ids.

    It works around the traps listed in shared/ENGINE-NOTES.md: mandatory MoE fields, a vision tower
    that must be made tiny, `global_head_dim`, explicit layer types.
    """
    text = dict(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
        global_head_dim=shape.head_dim,  # hidden default is 512 for full-attention layers
        # All layers attend fully: prompts stay within a few thousand tokens, and full-attention
        # caches can be cropped, which the prompt-cache reuse needs (sliding ones cannot, past the window).
        layer_types=["full_attention"] * shape.num_layers,
        num_experts=shape.num_experts,
        top_k_experts=shape.top_k_experts,
        moe_intermediate_size=shape.moe_intermediate_size,
        max_position_embeddings=shape.max_positions,
        pad_token_id=special["pad"],
        eos_token_id=special["eos"],
        bos_token_id=special["bos"],
    )
    return DiffusionGemmaConfig(
        text_config=text,
        vision_config=dict(_TINY_VISION),
        canvas_length=shape.canvas_length,
        image_token_id=special["image"],
        boi_token_id=special["boi"],
        eoi_token_id=special["eoi"],
    )


def shape_by_name(name: str, **overrides: int) -> ModelShape:
    if name not in SHAPES:
        raise ValueError(f"unknown model shape {name!r}; known: {', '.join(SHAPES)}")
    return replace(SHAPES[name], **overrides)


def describe(shape: ModelShape) -> dict[str, int]:
    return asdict(shape)
