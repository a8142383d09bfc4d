"""The model's layers for inference on a CPU, in fewer operations than transformers' modules take:
the encoder's prefill of the prompt and the decoder's denoising step (the two share their layers'
weights, so one set of fused layers runs both: causally over the prompt, bidirectionally over a canvas).

The arithmetic is that of `DiffusionGemmaEncoderTextModel` and `DiffusionGemmaDecoderModel` plus the
soft-capped head (checked against them in tests/test_fused_model.py); what differs is when things are
computed. Whatever stays the same over a canvas's steps (rotary tables, the prompt's keys and values,
the buffers the canvas's own keys are written into) is prepared once per canvas, weights that are
multiplied by the same input are fused once per model, and transformers' per-call machinery (output
recording, mask building, cache concatenation, rotary tables per step) is left out. On a small model a
step's cost is per-call overhead (many little operators and small matmuls), not arithmetic.
The layers are built from the checkpoint's tensors by name, so a server on a CPU never imports
transformers' modeling module (most of its start).
Shapes: B = rows, C = canvas length, P = prompt tokens in the cache, H = hidden, V = vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from engine.buffers import Buffers
from engine.forward import softcap_
from engine.fused_config import FusedConfig
from engine.kv_cache import KVCache
from engine.rotary import RotaryTables, unsupported_rope

if TYPE_CHECKING:
    from transformers import Cache

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def unsupported_reason(text: Any, tied: bool = True, device: torch.device | str = "cpu") -> str | None:
    """Why the fused layers cannot stand in for the encoder and decoder of a model with this text config
    (`tied`: the head tied to the embedding) on `device` (None: they can)."""
    if torch.device(device).type != "cpu":
        return "not on a CPU (on an accelerator the step is arithmetic, and transformers' modules run it)"
    if getattr(text, "use_clipped_linears", False):
        return "clipped linears"
    if getattr(text, "attention_bias", False):
        return "attention biases"
    if text.hidden_activation != "gelu_pytorch_tanh":
        return f"activation {text.hidden_activation}"
    if not text.final_logit_softcapping:
        return "no logit soft-capping"
    if not (tied and getattr(text, "tie_word_embeddings", True)):
        return "a head not tied to the embedding"
    if getattr(text, "use_bidirectional_attention", None) == "all":
        return "a bidirectional encoder"
    if getattr(text, "enable_moe_block", True) is False:
        return "no MoE block"
    if getattr(text, "kv_sharing_modes", None):
        return "keys and values shared between layers"
    kinds = set(text.layer_types[: text.num_hidden_layers]) - {"full_attention", "sliding_attention"}
    if kinds:
        return f"layer types {', '.join(sorted(kinds))}"
    return unsupported_rope(text)


class _Linear:
    """x @ w.T; on a CPU with oneDNN and a bf16 weight, with the weight reordered once into oneDNN's
    blocked layout (the plain layout is reordered again at every call, which dominates small matmuls).
    `single_rows`: the weight also serves one row at a time (a next-token step, one new prompt token),
    which an fp32 copy through BLAS computes without oneDNN's fixed cost per call; `narrow`: a weight of
    a few outputs (the router's), which that copy computes faster at any row count."""

    def __init__(self, weight: torch.Tensor, single_rows: bool = False, narrow: bool = False) -> None:
        self.weight: torch.Tensor | None = weight.detach()
        self.out_features = weight.shape[0]
        self.packed = None
        self.narrow = narrow
        self.single: torch.Tensor | None = None
        if weight.device.type == "cpu" and weight.dtype == torch.bfloat16 and _mkldnn_linear():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight, 16)
            # bf16 products are exact in fp32, and oneDNN sums them in fp32 too: the same arithmetic
            self.single = self.weight.float() if single_rows or narrow else None
            self.weight = None  # the packed copy is all a call needs; a copy made for it is freed

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is not None:
            return F.linear(x, self.weight)
        if self.single is not None and (self.narrow or _one_row(x)):
            return F.linear(x.float(), self.single).to(x.dtype)
        flat, rows = padded_rows(x)
        out = torch.ops.mkldnn._linear_pointwise(flat, self.packed, None, "none", [], "")
        return out[:rows].view(*x.shape[:-1], self.out_features)


class _GatedLinear:
    """gelu(x @ gate.T) * (x @ up.T), the first half of a gated MLP; with packed bf16 weights the gelu and
    the product are post-ops of oneDNN's two matmuls, applied to their fp32 sums (no tensor in between)."""

    def __init__(self, gate: torch.Tensor, up: torch.Tensor, single_rows: bool = False) -> None:
        self.gate, self.up = _Linear(gate, single_rows), _Linear(up, single_rows)
        self.out_features = up.shape[0]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate.packed is None or self.up.packed is None:
            return F.gelu(self.gate(x), approximate="tanh") * self.up(x)
        if self.gate.single is not None and self.up.single is not None and _one_row(x):
            single = x.float()  # rounded where oneDNN's post-ops round: the gelu, then the product
            gated = F.gelu(F.linear(single, self.gate.single), approximate="tanh").to(x.dtype)
            return (gated.float() * F.linear(single, self.up.single)).to(x.dtype)
        flat, rows = padded_rows(x)
        gated = torch.ops.mkldnn._linear_pointwise(flat, self.gate.packed, None, "gelu", [], "tanh")
        out = torch.ops.mkldnn._linear_pointwise.binary(flat, gated, self.up.packed, None, "mul")
        return out[:rows].view(*x.shape[:-1], self.out_features)


def _one_row(x: torch.Tensor) -> bool:
    return x.numel() == x.shape[-1]


def padded_rows(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """`x` as rows [N', H] with zero rows added up to `row_bucket(N)`, and N: oneDNN caches a kernel per
    row count, and a server's row counts (new prompt tokens, each expert's share) change with every
    request; a few counts keep a canvas step's kernels cached (docs/performance.md, "Memory")."""
    flat = x.reshape(-1, x.shape[-1])
    rows = flat.shape[0]
    bucket = row_bucket(rows)
    return (flat if bucket == rows else F.pad(flat, (0, 0, 0, bucket - rows))), rows


def row_bucket(rows: int) -> int:
    """The row count a matmul of `rows` rows runs at: the next power of two up to 16, a multiple of 16
    up to 128, then the next of 2^k x 1, 1.25, 1.5 or 1.75 (at most a quarter more rows)."""
    if rows <= 16:
        return 1 << (rows - 1).bit_length() if rows > 1 else rows
    if rows <= 128:
        return -(-rows // 16) * 16
    quarter = 1 << (rows.bit_length() - 3)  # a quarter of the power of two at or below `rows`
    return -(-rows // quarter) * quarter


def _mkldnn_linear() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


@dataclass
class _Norm:
    """An RMS norm as DiffusionGemmaRMSNorm computes it: in fp32, rounded once to the input's dtype
    (torch's kernel computes a bf16 input in fp32 itself, so no fp32 copy is made here)."""

    weight: torch.Tensor | None  # [D] in the model's dtype, or None for a norm without scale
    eps: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def _scaled_rms(x: torch.Tensor, scales: torch.Tensor, eps: float) -> torch.Tensor:
    """RMS norms of `x` over its last dimension, times fp32 `scales` (broadcast), rounded once to x's dtype:
    what DiffusionGemmaRMSNorm computes, bit for bit; one pass serves norms that read the same input or
    stacked inputs (torch's rms_norm on a CPU is a dozen small operators, whatever the size)."""
    return (F.rms_norm(x.float(), (x.shape[-1],), None, eps) * scales).to(x.dtype)


class _Layer:
    """One layer's weights (the encoder and the decoder share them), read once from the checkpoint."""

    def __init__(self, weights: Mapping[str, torch.Tensor], index: int, layer_type: str, text: Any) -> None:
        prefix = f"model.decoder.layers.{index}."

        def w(name: str) -> torch.Tensor:
            return weights[prefix + name]

        def norm(name: str) -> _Norm:
            return _Norm(w(name + ".weight"), text.rms_norm_eps)

        self.index = index
        self.layer_type = layer_type
        self.head_dim = w("self_attn.q_norm.weight").shape[0]
        self.kv_heads = w("self_attn.k_proj.weight").shape[0] // self.head_dim
        self.heads = w("self_attn.q_proj.weight").shape[0] // self.head_dim
        self.separate_values = prefix + "self_attn.v_proj.weight" in weights
        projections = ["q_proj", "k_proj"] + (["v_proj"] if self.separate_values else [])
        # Linears that read the same input as one weight: [(heads + kv_heads [+ kv_heads]) * D, H]
        self.qkv = _Linear(
            torch.cat([w(f"self_attn.{name}.weight") for name in projections]), single_rows=True
        )
        # q_norm, k_norm (and v_norm, which has no scale) as one norm over the head vectors, scales stacked
        self.qk_scale = torch.cat(
            [w("self_attn.q_norm.weight").float().expand(self.heads, -1),
             w("self_attn.k_norm.weight").float().expand(self.kv_heads, -1)]
        )  # fmt: skip
        self.qkv_scale = torch.cat([self.qk_scale, torch.ones_like(self.qk_scale[: self.kv_heads])])
        self.eps = text.rms_norm_eps
        self.o_proj = _Linear(w("self_attn.o_proj.weight"), single_rows=True)
        self.input_norm = norm("input_layernorm")
        self.post_attention_norm = norm("post_attention_layernorm")
        self.post_ff_norm = norm("post_feedforward_layernorm")
        self.gate_up = _GatedLinear(
            w("mlp.gate_proj.weight"), w("mlp.up_proj.weight"), single_rows=True
        )  # H -> I
        self.down = _Linear(w("mlp.down_proj.weight"), single_rows=True)

        # The three norms of the residual stream before the feed-forward blocks (dense MLP, experts, router)
        # as one, scales stacked [3, 1, 1, H]; the two after them (dense MLP's and experts' outputs) likewise.
        def scales(*names: str) -> torch.Tensor:
            stacked = [
                w(f"{name}.weight").float() if name else torch.ones(text.hidden_size) for name in names
            ]
            return torch.stack(stacked)[:, None, None]

        router = ""  # the router's norm has no scale
        self.pre_ff_scales = scales("pre_feedforward_layernorm", "pre_feedforward_layernorm_2", router)
        self.post_ff_scales = scales("post_feedforward_layernorm_1", "post_feedforward_layernorm_2")
        self.router_scale = w("router.scale")
        self.router_root = text.hidden_size**-0.5
        self.router_proj = _Linear(w("router.proj.weight"), narrow=True)  # H -> E
        self.per_expert_scale = w("router.per_expert_scale")
        self.top_k = text.top_k_experts
        gate_up, down = w("experts.gate_up_proj"), w("experts.down_proj")  # [E, 2I', H], [E, H, I']
        # Each expert alone, for many rows or one. Plain matmuls: their row counts change from call to call,
        # and oneDNN builds a kernel per shape, which post-ops make expensive to build.
        self.expert_gate_up = [_Linear(e, single_rows=True) for e in gate_up]  # E x [2I', H]
        self.expert_down = [_Linear(e, single_rows=True) for e in down]  # E x [H, I']
        # Every expert at once, for few rows: one matmul for the gates and ups, one batched for the downs,
        # each chosen expert's output rounded and weighed as the sparse path does, so that a prompt's
        # keys and values are the same however its tokens were split between prefills.
        self.all_gate_up = _Linear(gate_up.reshape(-1, gate_up.shape[-1]))  # [E * 2I', H]
        self.all_down = down.transpose(1, 2).contiguous()  # [E, I', H]
        # Every expert at once for a canvas, whose keys and values are never cached, so it may round
        # elsewhere: gelu and product as post-ops, one down projection over all experts' hidden units.
        gates, ups = gate_up.chunk(2, dim=1)  # [E, I', H] each
        self.canvas_gate_up = _GatedLinear(gates.flatten(0, 1), ups.flatten(0, 1))  # H -> E * I'
        self.canvas_down = _Linear(down.permute(1, 0, 2).reshape(down.shape[1], -1))  # E * I' -> H
        # The layer scalars are buffers, the encoder's not tied to the decoder's.
        self.decoder_scalar = _scalar(w("layer_scalar"))
        self.encoder_scalar = _scalar(weights[f"model.encoder.language_model.layers.{index}.layer_scalar"])

    def moe(self, x: torch.Tensor, router_input: torch.Tensor, canvas: bool) -> torch.Tensor:
        """The routed experts as transformers computes them: the router reads `router_input` (the residual
        stream normed without scale) and chooses, the experts read `x` ([N, H]). Few rows run every expert
        (4x the arithmetic of the top 2 of 8, in 2 or 3 matmuls instead of up to 16, and no shape that
        depends on the routing); many rows only the chosen ones, and so does a single row (a next-token
        step), for which reading every expert's weights costs more than two small products."""
        weights, index = self.route(router_input)
        if x.shape[0] > ALL_EXPERTS_ROWS or x.shape[0] == 1:
            return self.chosen_experts(x, weights, index)
        if canvas:
            return self.canvas_experts(x, weights, index)
        return self.all_experts(x, weights, index)

    def route(self, normed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's top-k experts ([N, k]) and their weights ([N, k], fp32), from the residual stream
        normed without scale."""
        probs = self.router_proj(normed * self.router_scale * self.router_root).softmax(
            dim=-1, dtype=torch.float32
        )
        weights, index = probs.topk(self.top_k, dim=-1)
        return weights / weights.sum(dim=-1, keepdim=True) * self.per_expert_scale[index], index

    def chosen_experts(self, x: torch.Tensor, weights: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Each expert over the rows that chose it, as transformers runs them."""
        experts, order = index.reshape(-1).sort()
        counts = torch.bincount(experts, minlength=len(self.expert_gate_up)).tolist()
        picked = x[order // self.top_k]
        parts = []
        start = 0
        for expert, count in enumerate(counts):
            if count:
                gate, up = self.expert_gate_up[expert](picked[start : start + count]).chunk(2, dim=-1)
                parts.append(self.expert_down[expert](F.gelu(gate, approximate="tanh") * up))
                start += count
        out = torch.cat(parts) * weights.reshape(-1)[order, None]  # fp32, as transformers weighs them
        restored = torch.empty_like(out).index_copy_(0, order, out)
        return restored.view(x.shape[0], self.top_k, -1).sum(dim=1).to(x.dtype)

    def all_experts(self, x: torch.Tensor, weights: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Every expert over every row, weighed by the routing (zero for experts not chosen): each
        chosen expert's output is computed and weighed as in the sparse path, so the sum is the same."""
        experts = len(self.expert_gate_up)
        x, rows = padded_rows(x)  # the batched matmul's kernels are cached per row count too
        bucket = x.shape[0]
        share = F.pad(self.shares(index, weights), (0, 0, 0, bucket - rows))
        gate, up = self.all_gate_up(x).view(bucket, experts, 2, -1).unbind(2)  # [N', E, I'] each
        hidden = (F.gelu(gate, approximate="tanh") * up).transpose(0, 1)  # [E, N', I']
        out = torch.bmm(hidden, self.all_down)  # [E, N', H]
        return (out.float() * share.t()[..., None]).sum(dim=0)[:rows].to(x.dtype)

    def canvas_experts(self, x: torch.Tensor, weights: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Every expert over a canvas's rows, each expert's hidden units weighed by its routing weight
        (zero when not chosen) before one down projection over all of them: fewer, larger matmuls than
        `all_experts`, rounding in other places (a canvas's keys and values are never cached)."""
        rows, experts = x.shape[0], len(self.expert_gate_up)
        # fp32 weights: a weight rounded to bf16 would scale all of its expert's output by one error
        share = self.shares(index, weights)
        hidden = (self.canvas_gate_up(x).view(rows, experts, -1) * share[..., None]).to(x.dtype)  # [N, E, I']
        return self.canvas_down(hidden.view(rows, -1))

    def shares(self, index: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Each row's fp32 weight for every expert ([N, E]): its routing weight, zero where not chosen."""
        experts = len(self.expert_gate_up)
        return torch.zeros(index.shape[0], experts, dtype=weights.dtype, device=index.device).scatter_(
            1, index, weights
        )

    def __call__(
        self,
        hidden: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        attend: Attend,
        scalar: torch.Tensor | None,
        canvas: bool = False,
    ) -> torch.Tensor:
        """The layer over [B, T, H]; `attend` does the attention: (queries [B, heads, T, D], this pass's
        keys and values [B, kv_heads, T, D]) -> [B, heads, T, D]; `scalar` is the encoder's or the
        decoder's layer scalar (None: one); `canvas`: the decoder's step (nothing of it is cached)."""
        batch, length, _ = hidden.shape
        d, heads, kv = self.head_dim, self.heads, self.kv_heads
        projected = self.qkv(self.input_norm(hidden)).view(batch, length, -1, d)
        if self.separate_values:
            normed = _scaled_rms(projected, self.qkv_scale, self.eps)
            qk, values = normed[:, :, : heads + kv], normed[:, :, heads + kv :]
        else:
            values = F.rms_norm(projected[:, :, heads : heads + kv], (d,), None, self.eps)
            qk = _scaled_rms(projected[:, :, : heads + kv], self.qk_scale, self.eps)
        half = d // 2
        rotated = torch.cat((-qk[..., half:], qk[..., :half]), dim=-1)
        qk = qk * cos + rotated * sin  # [B, T, heads + kv, D]
        attended = attend(
            qk[:, :, :heads].transpose(1, 2), qk[:, :, heads:].transpose(1, 2), values.transpose(1, 2)
        )  # [B, heads, T, D]
        attended = self.o_proj(attended.transpose(1, 2).reshape(batch, length, heads * d))
        hidden = hidden + self.post_attention_norm(attended)

        dense_input, experts_input, router_input = _scaled_rms(hidden[None], self.pre_ff_scales, self.eps)
        dense = self.down(self.gate_up(dense_input))
        width = hidden.shape[-1]
        routed = self.moe(experts_input.reshape(-1, width), router_input.reshape(-1, width), canvas)
        outputs = _scaled_rms(torch.stack((dense, routed.view(hidden.shape))), self.post_ff_scales, self.eps)
        hidden = hidden + self.post_ff_norm(outputs[0] + outputs[1])
        return hidden if scalar is None else hidden * scalar


# Up to this many rows (tokens) the experts run all at once: cheaper than the chosen experts alone
# for a canvas's few rows, dearer for a long prefill (docs/performance.md, "Faster steps on a CPU").
ALL_EXPERTS_ROWS = 64


def _scalar(value: torch.Tensor) -> torch.Tensor | None:
    return None if bool((value == 1).all()) else value


class CanvasStep:
    """The decoder over one canvas of B rows at fixed positions against a prompt cache, step after step."""

    def __init__(self, fused: FusedModel, cache: Cache, positions: torch.Tensor, batch: int) -> None:
        self.fused = fused
        length = positions.shape[-1]
        dtype = fused.dtype
        self.rotary = fused.rotary_tables(positions)
        # Per layer: the prompt's keys and values followed by room for the canvas's, written each step, in
        # the model's kept buffers (one canvas is denoised at a time).
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        for layer in fused.layers:
            cached = cache.layers[layer.index]
            prompt = cached.keys.shape[-2] if cached.keys is not None and cached.keys.numel() else 0
            shape = (batch, layer.kv_heads, prompt + length, layer.head_dim)
            keys = fused.buffers.get(f"keys.{layer.index}", shape, dtype, positions.device)
            values = fused.buffers.get(f"values.{layer.index}", shape, dtype, positions.device)
            if prompt:
                keys[:, :, :prompt] = cached.keys
                values[:, :, :prompt] = cached.values
            self.keys.append(keys)
            self.values.append(values)
        self.prompt_lengths = [k.shape[-2] - length for k in self.keys]
        self.attends = [
            partial(_attend_canvas, layer, keys, values, start)
            for layer, keys, values, start in zip(
                fused.layers, self.keys, self.values, self.prompt_lengths, strict=True
            )
        ]

    @torch.inference_mode()
    def __call__(
        self,
        canvas: torch.Tensor,
        self_conditioning: torch.Tensor | None = None,
        out: torch.Tensor | None = None,
        probabilities: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits of one denoising step ([B, C] tokens, previous logits or None) -> [B, C, V] fp32, written
        into `out` when given (else a fresh tensor); `probabilities`: softmax(previous logits) in fp32,
        when the sampler has it (its last bits may differ from torch.softmax's)."""
        fused = self.fused
        hidden = F.embedding(canvas, fused.embedding) * fused.embed_scale
        if self_conditioning is not None:
            soft = fused.soft_embedding(self._probabilities(self_conditioning, probabilities))
            signal = fused.sc_pre_norm(soft * fused.embed_scale)
            hidden = hidden + fused.sc_down(fused.sc_gate_up(signal))
        hidden = fused.sc_post_norm(hidden)  # without a signal the block adds exact zeros
        for layer, attend in zip(fused.layers, self.attends, strict=True):
            cos, sin = self.rotary[layer.layer_type]
            hidden = layer(hidden, cos, sin, attend, layer.decoder_scalar, canvas=True)
        logits = fused.head(fused.final_norm(hidden))  # [B, C, V]
        logits = logits.float() if out is None else out.copy_(logits)  # fp32, softcapped in place below
        return softcap_(logits, fused.softcap)

    def _probabilities(self, logits: torch.Tensor, known: torch.Tensor | None = None) -> torch.Tensor:
        """softmax(`logits`) in fp32 (`known` when the caller has it), rounded to the model's dtype: the
        self-conditioning input, worked out in the model's kept buffers."""
        fused = self.fused
        if known is not None:
            probs = known
        else:
            probs = fused.buffers.get("self_conditioning", logits.shape, torch.float32, logits.device)
            torch.softmax(logits, dim=-1, dtype=torch.float32, out=probs)
        if fused.dtype == torch.float32:
            return probs
        rounded = fused.buffers.get("self_conditioning_rounded", logits.shape, fused.dtype, logits.device)
        return rounded.copy_(probs)


def _attend_canvas(
    layer: _Layer, keys: torch.Tensor, values: torch.Tensor, start: int, queries, own_keys, own_values
) -> torch.Tensor:
    """The canvas's queries over the prompt's keys and the canvas's own, written into the buffers after
    the prompt's (from `start`); a plain function, so a step's callbacks hold no cycle back to the step
    (which would keep its buffers alive until the garbage collector runs)."""
    keys[:, :, start:] = own_keys
    values[:, :, start:] = own_values
    return F.scaled_dot_product_attention(
        queries, keys, values, scale=1.0, enable_gqa=layer.heads != layer.kv_heads
    )


class FusedModel:
    """The layers' weights arranged for the prompt's prefill and the canvas's steps, built once per model
    from its checkpoint's tensors (see `unsupported_reason`); a `Backbone`."""

    def __init__(
        self,
        weights: Mapping[str, torch.Tensor],
        text: Any,
        canvas_length: int,
        parameter_count: int,
        tied: bool = True,
    ) -> None:
        """`weights`: the checkpoint's tensors by name (those under `checkpoint_weights.TEXT_PREFIXES`
        are read), in the dtype to compute in; `text`: its FusedConfig (or the DiffusionGemmaTextConfig
        it is resolved from); `parameter_count`:
        the whole model's, as transformers counts them; `tied`: the top config's tie_word_embeddings."""
        embedding = weights["model.decoder.embed_tokens.weight"]  # [V, H], tied with the head
        reason = unsupported_reason(text, tied, embedding.device)
        if reason:
            raise ValueError(f"the fused layers do not support this model: {reason}")
        text = text if isinstance(text, FusedConfig) else FusedConfig.of(text)
        self.text_config = text
        self.canvas_length = canvas_length
        self.parameter_count = parameter_count
        self.device = embedding.device
        self.dtype = embedding.dtype
        self.embedding = embedding
        self.head = _Linear(embedding)
        self.soft_embedding = _Linear(embedding.t().contiguous())  # probabilities [V] -> [H]
        self.embed_scale = torch.tensor(text.hidden_size**0.5).to(self.dtype)
        self.softcap = float(text.final_logit_softcapping)
        sc = "model.decoder.self_conditioning."
        self.sc_pre_norm = _Norm(weights[sc + "pre_norm.weight"], text.rms_norm_eps)
        self.sc_post_norm = _Norm(None, text.rms_norm_eps)
        self.sc_gate_up = _GatedLinear(weights[sc + "gate_proj.weight"], weights[sc + "up_proj.weight"])
        self.sc_down = _Linear(weights[sc + "down_proj.weight"])
        self.rotary = RotaryTables(text.rotary, self.device)
        layer_types = text.layer_types[: text.num_hidden_layers]
        self.layers = [_Layer(weights, index, kind, text) for index, kind in enumerate(layer_types)]
        self.final_norm = _Norm(weights["model.decoder.norm.weight"], text.rms_norm_eps)
        self.sliding_window = text.sliding_window or 0
        self.buffers = Buffers()  # a step's arrays over the vocabulary, kept between steps and requests

    @classmethod
    def of_module(cls, model: torch.nn.Module) -> FusedModel:
        """From a transformers model in memory (a run's weights, a test's random model); its own modules
        are left as they were."""
        config = model.config
        count = sum(p.numel() for p in model.parameters())
        return cls(
            model.state_dict(),
            config.get_text_config(),
            config.canvas_length,
            count,
            config.tie_word_embeddings,
        )

    def new_cache(self) -> KVCache:
        return KVCache(list(self.text_config.cache_windows))

    def canvas_step(self, cache: Cache, canvas: torch.Tensor, positions: torch.Tensor) -> CanvasStep:
        """The decoder's step over canvases shaped like `canvas` ([B, C]) at `positions` ([1, C])."""
        return CanvasStep(self, cache, positions, canvas.shape[0])

    def next_token_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The head over encoder states ([..., H] -> [..., V]), soft-capped, fp32."""
        return softcap_(self.head(hidden).float(), self.softcap)

    def rotary_tables(self, positions: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """cos and sin per layer type at `positions` ([1, T]), shaped [1, T, 1, D] to broadcast over heads."""
        tables = {}
        for layer_type in {layer.layer_type for layer in self.layers}:
            cos, sin = self.rotary(positions, layer_type, self.dtype)  # [1, T, D]
            tables[layer_type] = (cos[:, :, None], sin[:, :, None])
        return tables

    @torch.inference_mode()
    def encode(self, ids: torch.Tensor, cache: Cache) -> torch.Tensor:
        """The encoder over `ids` ([B, T]) right after what `cache` holds, appending their keys and values
        to `cache`; its last hidden states [B, T, H]. The encoder's layers hold the decoder's weights, so
        the same fused layers run it, causally."""
        ids = ids.to(self.device)
        start = cache.get_seq_length()
        positions = torch.arange(start, start + ids.shape[1], device=self.device)[None]  # [1, T]
        hidden = F.embedding(ids, self.embedding) * self.embed_scale
        rotary = self.rotary_tables(positions)
        for layer in self.layers:
            cos, sin = rotary[layer.layer_type]
            attend = partial(self._causal, layer, cache, positions[0])
            hidden = layer(hidden, cos, sin, attend, layer.encoder_scalar)
        return self.final_norm(hidden)

    def _causal(
        self, layer: _Layer, cache: Cache, positions: torch.Tensor, queries, keys, values
    ) -> torch.Tensor:
        """Queries at `positions` ([T]) over the cache's keys and their own, each seeing what precedes it
        (within the sliding window on a sliding layer)."""
        keys, values = cache.update(keys, values, layer.index)  # the cache's tail then these: [B, kv, K, D]
        window = self.sliding_window if layer.layer_type == "sliding_attention" else 0
        total, length = keys.shape[-2], positions.shape[0]
        outside_window = bool(window) and total > window
        # Nothing cached before these tokens: plain causal attention, which needs no [T, T] mask and skips
        # the blocks it would hide.
        causal = total == length > 1 and not outside_window
        mask = None
        if not causal and (length > 1 or outside_window):
            last = int(positions[-1])
            key_positions = torch.arange(last + 1 - total, last + 1, device=positions.device)
            mask = key_positions[None, :] <= positions[:, None]  # [T, K]
            if window:
                mask &= key_positions[None, :] > positions[:, None] - window
        return F.scaled_dot_product_attention(
            queries, keys, values, attn_mask=mask, is_causal=causal, scale=1.0,
            enable_gqa=layer.heads != layer.kv_heads,
        )  # fmt: skip
