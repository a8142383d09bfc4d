"""Server options: one tree of dataclasses with a default for every field.

They arrive as camelCase JSON in `initializationOptions` or `workspace/didChangeConfiguration`
(under a `dgemma` key or at the top level). Bad values are collected as messages (the server shows
them once) and the defaults are kept; the server never refuses to start over an option.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, get_type_hints

from engine.remote_settings import FAMILIES


@dataclass(frozen=True)
class ContextOptions:
    """Window budgets in model tokens, and how windows are kept still and cut; defaults suit 1-2k tokens."""

    prefix_tokens: int = 768
    suffix_tokens: int = 256
    anchor_slack: float = 1.25  # reuse an old window edge while the window holds <= budget * slack
    min_fill: float = 0.5  # ... and >= budget * min_fill (unless it reaches the file's edge)
    boundary_fill: float = 0.5  # a syntax boundary may shrink a fresh window to this fraction
    max_lines: dict[str, int] = field(
        default_factory=lambda: {"single_line": 1, "multi_line": 8, "block": 32}
    )
    # The repository around the open documents (dgemma_lsp/repository): read for a local model, not for a
    # remote one unless set (its snippets would leave the machine); True or False decides for both.
    workspace: bool | None = None
    # Of the prompt, for other files' snippets (0: lookup drafts only); unset: WORKSPACE_TOKENS for a model
    # that learned to read them (EngineInfo.reads_context), else 0.
    workspace_tokens: int | None = None
    workspace_exclude: tuple[str, ...] = ()  # gitignore-style patterns, relative to each workspace folder
    workspace_max_files: int = 10_000
    workspace_max_bytes: int = 128 * 1024 * 1024  # of code indexed (the texts stay on disk)
    workspace_max_file_bytes: int = 256 * 1024

    def __post_init__(self) -> None:
        if self.prefix_tokens < 1 or self.suffix_tokens < 0:
            raise ValueError("prefix_tokens must be >= 1 and suffix_tokens >= 0")
        if self.anchor_slack < 1 or not 0 <= self.min_fill <= 1 or not 0 <= self.boundary_fill <= 1:
            raise ValueError("anchor_slack must be >= 1; min_fill and boundary_fill in [0, 1]")
        missing = {"single_line", "multi_line", "block"} - self.max_lines.keys()
        if missing:
            raise ValueError(f"max_lines lacks {sorted(missing)}")


WORKSPACE_TOKENS = 384


def workspace_tokens(options: ContextOptions, reads_context: bool) -> int:
    """The prompt tokens other files' snippets may take, for a model that reads them or not."""
    if options.workspace_tokens is not None:
        return options.workspace_tokens
    return WORKSPACE_TOKENS if reads_context else 0


# The completion budget when none is set: room for a few denoising steps of the bundled model on a CPU or
# of the 26B-A4B model on a GPU; the sampler answers sooner whenever the canvas settles. A remote engine's
# covers a network round trip and a server's answer as well (docs/team-server.md, "Latency budget").
DEFAULT_BUDGET_MS = {"cpu": 250, "gpu": 150, "remote": 1000}


def completion_budget_ms(options: CompletionOptions, device: str) -> int:
    """The completion latency budget in force on `device` (an engine's device: cpu, cuda:0, mps, remote)."""
    if options.latency_budget_ms is not None:
        return options.latency_budget_ms
    kind = "cpu" if device.startswith("cpu") else "remote" if device == "remote" else "gpu"
    return DEFAULT_BUDGET_MS[kind]


@dataclass(frozen=True)
class CompletionOptions:
    # Wall-clock budget from request to answer; the sampler returns its best canvas when it is spent.
    # 0: no deadline (the sampler runs until it converges or reaches its step limit); unset: by the
    # device the model runs on (DEFAULT_BUDGET_MS).
    latency_budget_ms: int | None = None
    max_tokens_single_line: int = 32
    max_tokens_multi_line: int = 96
    # Tokens per canvas for a single-line completion (0: the model's canvas): most lines fit in 16,
    # and each step over a canvas of 16 costs less than over 32; a longer line goes on in a second one.
    canvas_tokens_single_line: int = 16
    candidates: int = 1
    max_steps: int = 0  # 0: the model's own default
    # Ghost text stops before the first line holding a token the model gave less than this
    # probability; a completion whose mean token probability is lower is not offered at all.
    # Unset: the gates calibrated for the model (its calibration.json), else 0.
    min_line_confidence_percent: int | None = None
    min_mean_confidence_percent: int | None = None
    # A completion from the model's own next-token draft is offered only if the next-token head's mean
    # probability of its tokens is at least this, in place of the mean gate above (the canvas's
    # confidence in its own head's text says little). Unset: the model's calibrated gate, else 0 (off:
    # the mean gate applies to them too).
    min_next_token_confidence_percent: int | None = None
    # Such a completion also stops before the first line holding a token the next-token head gave less
    # than this probability: where the head's draft ran out and the canvas wrote on, or it lost its way.
    min_next_token_line_confidence_percent: int = 1
    # Renoise and re-denoise the tokens of a completion that breaks the parse (tree-sitter languages).
    syntax_repair: bool = True
    # Fix the rest of the line at the end of the canvas, so a single-line completion joins it.
    anchor_suffix: bool = True
    # Languages to complete in (LSP language ids or names); empty: those the model was trained on (its
    # training.json; every language for a checkpoint made elsewhere). Listing one turns it on.
    languages: tuple[str, ...] = ()
    # Drafts from the code around the cursor (repeats, sibling statements) seed canvas rows of their own.
    drafts: bool = True
    # Where the code around the cursor offers no draft, the model writes one left to right with its
    # next-token head, and the canvas revises it (the bundled model's next-token head writes better
    # than its canvas does from noise).
    next_token_draft: bool = True
    # "diffusion", or "autoregressive": the same weights decoded left to right (for comparisons).
    decoder: str = "diffusion"
    # How readily a suggestion is shown: "quiet" and "balanced" hide those the model's show-or-not decision
    # says are unlikely to be taken (quiet more of them) and show only their sure part; "eager" shows every
    # one the pipeline keeps. Without a decision shipped for the model, all three are eager.
    eagerness: str = "balanced"
    # "automatic": a suggestion as you type; "manual": only when the editor asks for one (its key).
    trigger: str = "automatic"
    # Tell a client that declares `dgemma/confidence` which parts of a suggestion the model was unsure of.
    show_confidence: bool = True


@dataclass(frozen=True)
class RewriteOptions:
    # Share of the block's tokens renoised before denoising starts: higher rewrites more.
    strength_percent: int = 30
    latency_budget_ms: int = 3000
    # Lines from the cursor that a next-edit suggestion may change.
    next_edit_lines: int = 3


@dataclass(frozen=True)
class RemoteOptions:
    """For a model given as a URL (a team's server): how to talk to it."""

    # The prompt the served checkpoint expects: auto (from the server's tokenizer), fim, gemma4-chat.
    family: str = "auto"
    # Sent as a bearer token; empty: the DGEMMA_API_KEY environment variable. Never logged.
    api_key: str = field(default="", repr=False)


@dataclass(frozen=True)
class Options:
    model: str = "default"
    device: str = "auto"
    threads: int = 0  # 0: torch decides
    context: ContextOptions = field(default_factory=ContextOptions)
    completion: CompletionOptions = field(default_factory=CompletionOptions)
    rewrite: RewriteOptions = field(default_factory=RewriteOptions)
    remote: RemoteOptions = field(default_factory=RemoteOptions)
    # Log document text (prompts, completions): off by default, code stays out of logs.
    debug_log: bool = False


_SECRET = {"api_key"}
_POSITIVE = {
    "prefix_tokens",
    "suffix_tokens",
    "max_tokens_single_line",
    "max_tokens_multi_line",
    "candidates",
}
DECODERS = ("diffusion", "autoregressive")
EAGERNESS = ("quiet", "balanced", "eager")
TRIGGERS = ("automatic", "manual")
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def parse_options(raw: Any, base: Options | None = None) -> tuple[Options, list[str]]:
    """Options from client JSON, on top of `base`; returns them and the problems found."""
    base = base or Options()
    if raw is None:
        return base, []
    if isinstance(raw, dict) and isinstance(raw.get("dgemma"), dict):
        raw = raw["dgemma"]
    if not isinstance(raw, dict):
        return base, [f"options must be an object, got {type(raw).__name__}; using defaults"]
    problems: list[str] = []
    options = _merge(base, raw, "", problems)
    if not _DEVICE.match(options.device):
        problems.append(f"device {options.device!r} is not one of auto, cpu, cuda, cuda:N, mps; using 'auto'")
        options = replace(options, device="auto")
    if options.remote.family not in FAMILIES:
        problems.append(f"remote.family {options.remote.family!r} is not one of {', '.join(FAMILIES)}")
        options = replace(options, remote=replace(options.remote, family="auto"))
    if options.completion.decoder not in DECODERS:
        problems.append(
            f"completion.decoder {options.completion.decoder!r} is not one of {', '.join(DECODERS)}"
        )
        options = replace(options, completion=replace(options.completion, decoder="diffusion"))
    for name, allowed in (("eagerness", EAGERNESS), ("trigger", TRIGGERS)):
        value = getattr(options.completion, name)
        if value not in allowed:
            default = getattr(CompletionOptions(), name)
            problems.append(
                f"completion.{name} {value!r} is not one of {', '.join(allowed)}; using {default!r}"
            )
            options = replace(options, completion=replace(options.completion, **{name: default}))
    return options, problems


def _merge(current: Any, raw: dict, path: str, problems: list[str]) -> Any:
    hints = get_type_hints(type(current))
    known = {f.name for f in fields(current)}
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        name = _snake(key)
        where = f"{path}{key}"
        if name not in known:
            problems.append(f"unknown option {where!r} ignored")
            continue
        old = getattr(current, name)
        if is_dataclass(old):
            if isinstance(value, dict):
                changes[name] = _merge(old, value, f"{where}.", problems)
            else:
                problems.append(f"option {where!r} must be an object; kept the default")
            continue
        checked = _check(name, hints[name], value)
        if checked is None:
            if name in _SECRET:  # a key, mistyped or not, stays out of messages and the log
                problems.append(f"option {where!r} has an invalid value; kept the previous one")
            else:
                problems.append(f"option {where!r} has an invalid value {value!r}; kept {old!r}")
        else:
            changes[name] = checked
    try:
        return replace(current, **changes)
    except ValueError as err:  # a combination the dataclass refuses (its __post_init__)
        problems.append(f"options {path.rstrip('.') or 'at the top level'}: {err}; kept the defaults there")
        return current


def _check(name: str, hint: Any, value: Any) -> Any:
    if hint == int | None:
        return _check(name, int, value)
    if hint == bool | None:
        return _check(name, bool, value)
    if hint is bool:
        return value if isinstance(value, bool) else None
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        if name.endswith("_percent") and value > 100:
            return None
        return None if name in _POSITIVE and value == 0 else value
    if hint is float:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if hint is str:
        return value if isinstance(value, str) and value.strip() else None
    if hint == tuple[str, ...] and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None
