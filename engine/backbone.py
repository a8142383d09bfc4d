"""The forward passes an engine runs, behind one interface: the fused layers on a CPU
(`engine.fused_model.FusedModel`, loaded without transformers' modeling module), transformers' own
modules elsewhere (`ModuleBackbone`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

from engine.forward import decoder_masks, denoise_logits, encode, lm_logits, new_cache

if TYPE_CHECKING:
    from transformers import Cache, DynamicCache

    from engine.kv_cache import KVCache


class DecoderStep(Protocol):
    def __call__(
        self,
        tokens: torch.Tensor,
        previous: torch.Tensor | None,
        /,
        out: torch.Tensor | None = None,
        probabilities: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One denoising step of a canvas: (tokens [B, C], previous step's logits or None) -> logits
        [B, C, V], written into `out` ([B, C, V] fp32) where the backbone can: use what it returns.
        `probabilities`: softmax(previous) in fp32 where the sampler has it already, which a backbone may
        read in place of working it out again for self-conditioning."""
        ...


class Backbone(Protocol):
    text_config: Any  # the checkpoint's DiffusionGemmaTextConfig, or the FusedConfig resolved from it
    canvas_length: int  # the canvas the model was made for (a request may use a shorter one)
    device: torch.device
    parameter_count: int  # the model's parameters (tied ones once), as transformers counts them

    def new_cache(self) -> DynamicCache | KVCache:
        """An empty cache for the encoder's keys and values (transformers', or the fused layers' own)."""
        ...

    def encode(self, ids: torch.Tensor, cache: Cache) -> torch.Tensor:
        """The encoder over `ids` ([B, T]) after what `cache` holds, appending to it; [B, T, H]."""
        ...

    def canvas_step(self, cache: Cache, canvas: torch.Tensor, positions: torch.Tensor) -> DecoderStep:
        """The decoder's step for canvases shaped like `canvas` ([B, C]) at `positions` ([1, C]) against
        the prompt in `cache` (only read)."""
        ...

    def next_token_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The head over encoder states ([..., H] -> [..., V]), soft-capped, fp32."""
        ...


class ModuleBackbone:
    """A transformers DiffusionGemma model's own modules (any device, any variant of the architecture)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model.eval()
        self.text_config = model.config.get_text_config()
        self.canvas_length = int(model.config.canvas_length)
        self.device = next(model.parameters()).device
        self.parameter_count = sum(p.numel() for p in model.parameters())

    def new_cache(self) -> DynamicCache:
        return new_cache(self.model)

    @torch.inference_mode()
    def encode(self, ids: torch.Tensor, cache: Cache) -> torch.Tensor:
        return encode(self.model, ids.to(self.device), cache)

    def canvas_step(self, cache: Cache, canvas: torch.Tensor, positions: torch.Tensor) -> DecoderStep:
        model = self.model
        masks = decoder_masks(model, canvas, cache)

        def step(
            tokens: torch.Tensor,
            previous: torch.Tensor | None,
            out: torch.Tensor | None = None,
            probabilities: torch.Tensor | None = None,
        ):
            return denoise_logits(model, tokens, cache, positions, masks, previous)  # in the model's dtype

        return step

    def next_token_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return lm_logits(self.model, hidden)


def backbone_of(model: torch.nn.Module) -> Backbone:
    """The fastest backbone for a model in memory: the fused layers where they apply, else its modules."""
    from engine.fused_model import FusedModel, unsupported_reason

    device = next(model.parameters()).device
    if unsupported_reason(model.config.get_text_config(), model.config.tie_word_embeddings, device) is None:
        return FusedModel.of_module(model)
    return ModuleBackbone(model)
