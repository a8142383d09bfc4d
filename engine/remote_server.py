"""What a remote server is and can do, asked once: its model, prompt family, canvas and diffusion extras.

A vLLM serving DiffusionGemma (0.32 and later) takes per-request diffusion controls in `vllm_xargs`
(a seed canvas, pinned positions, a step cap, a canvas width, one-canvas reads) and checks them when a
request arrives: a seed canvas of one id is refused with "must hold exactly N ids" (N: the served
canvas), an id past the vocabulary with "ids must be in [0, V)", and each other control with a
message naming it when its value is out of range. The probe sends one such request per control, all
at once, and reads the canvas, the vocabulary and the controls taken off the refusals; nothing is
generated. A server that answers otherwise (an older vLLM, SGLang, any OpenAI-compatible server)
gets plain requests.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from engine.api import CancelToken
from engine.remote_http import Call, HttpClient, RemoteError
from engine.remote_settings import RemoteSettings
from engine.tokenizer import EOS, FILE_SEP, FIM_MIDDLE, special_tokens

# End-of-text tokens of the released chat checkpoint's tokenizer (Gemma 4), and of ours.
CHAT_END_TOKENS = ("<eos>", "<end_of_turn>", "<turn|>")
# A few lines of code: how many characters a token of the served tokenizer holds, to size windows.
SAMPLE = (
    "def mean(values: list[float]) -> float:\n"
    '    """The arithmetic mean of `values`."""\n'
    "    if not values:\n"
    '        raise ValueError("mean of nothing")\n'
    "    return sum(values) / len(values)\n"
)
_CANVAS = re.compile(r"diffusion_seed_canvas must hold exactly (\d+) ids")
_VOCAB = re.compile(r"diffusion_seed_canvas ids must be in \[0, (\d+)\)")
PROBE_ID = 2**31 - 1  # past any vocabulary
# The diffusion controls the engine sends, each with a value the server must refuse (naming it) if it
# checks that control: nothing a refusal stops is generated.
CONTROLS: dict[str, object] = {
    "diffusion_seed_canvas": [0],  # one id: "must hold exactly N ids"
    "diffusion_pinned": [0],  # without a seed: "needs a diffusion_seed_canvas"
    "diffusion_max_steps": 0,
    "diffusion_canvas_length": 0,
    "diffusion_read_only": 2,
}


@dataclass(frozen=True)
class ServerFacts:
    """What the server said about itself: the engine builds its requests from this, doctor prints it."""

    model: str
    max_model_len: int | None
    version: str | None
    family: str  # fim or gemma4-chat
    family_reason: str  # why that family: forced, or what the tokenizer holds
    tokenize: bool  # /tokenize answers: ids can be sent
    extras: bool  # vllm_xargs diffusion controls are understood
    canvas: int  # the served canvas width (0: unknown)
    vocab_size: int  # 0: unknown
    eos_ids: tuple[int, ...] = ()
    control_ids: tuple[int, ...] = ()  # ids a middle never holds: it ends there (EOS among them)
    file_sep: bool = False  # the FIM tokenizer has a file separator: other files' snippets can be sent
    chars_per_token: float = 3.5
    extras_note: str = ""  # why the extras are off
    controls: tuple[str, ...] = ()  # the diffusion controls (CONTROLS) the server checks, so takes
    separator: tuple[int, str] | None = None  # a control token's id and text: it splits a detokenization

    @property
    def seeding(self) -> bool:
        """Whether canvases can be seeded and pinned: extras, ids and an end-of-text id are known."""
        return self.extras and self.tokenize and bool(self.eos_ids) and self.vocab_size > 0

    def summary(self) -> str:
        """One line for the log."""
        extras = f"diffusion extras, canvas {self.canvas}" if self.extras else "no diffusion extras"
        version = f"vLLM {self.version}" if self.version else "server version not given"
        return f"{self.model} ({version}), {self.family} prompt, {extras}"

    def describe(self) -> list[str]:
        """Lines for `dgemma-lsp doctor`: each control the engine sends, and whether the server took it."""
        extras = (
            f"diffusion extras: yes, canvas {self.canvas}, vocabulary {self.vocab_size:,}"
            if self.extras
            else f"diffusion extras: no ({self.extras_note}); plain requests"
        )
        lines = [
            f"served model  {self.model} (max length {self.max_model_len or '?'} tokens)",
            f"server        {'vLLM ' + self.version if self.version else 'version not given'}",
            f"prompt        {self.family} ({self.family_reason})",
            f"tokenize      {'yes' if self.tokenize else 'no (/tokenize missing)'}, "
            f"~{self.chars_per_token:.1f} characters per token",
            f"extras        {extras}",
        ]
        for name in CONTROLS:
            taken = "checked: taken" if name in self.controls else "not taken (the server ignores it)"
            lines.append(f"  {name:<24} {taken}")
        return lines


def probe(
    client: HttpClient,
    settings: RemoteSettings,
    deadline: float | None = None,
    cancel: CancelToken | None = None,
) -> ServerFacts:
    """Ask the server what it serves and supports; raises RemoteError when it cannot be used at all,
    and Abandoned when `cancel` is set or `deadline` passes first (a re-probe inside a request)."""
    ask = Asking(client, deadline, cancel)
    models = client.call(Call("/v1/models"), deadline, cancel).get("data")
    if not isinstance(models, list) or not models or not isinstance(models[0], dict):
        raise RemoteError(f"remote engine at {client.base} serves no model (GET /v1/models)", "malformed")
    model = str(models[0].get("id", ""))
    max_len = models[0].get("max_model_len")
    version, fim, sample = ask.answers(
        [Call("/version"), tokenize_call(model, FIM_MIDDLE), tokenize_call(model, SAMPLE)]
    )
    tokenize = isinstance(sample, dict) and isinstance(sample.get("tokens"), list)
    has_fim = isinstance(fim, dict) and len(fim.get("tokens") or []) == 1
    family, reason = _family(settings.family, has_fim, tokenize)
    single = _single_tokens(ask, model, family) if tokenize else {}
    eos_ids = (single[EOS],) if family == "fim" and EOS in single else tuple(single.values())
    control_ids = tuple(sorted(set(single.values()))) if family == "fim" else eos_ids
    canvas, vocab, controls, note = _extras(ask, model)
    separator = next(iter(single.items()), None)
    per_token = len(SAMPLE) / max(1, len(sample["tokens"])) if tokenize else 3.5
    return ServerFacts(
        model=model,
        max_model_len=max_len if isinstance(max_len, int) else None,
        version=str(version["version"]) if isinstance(version, dict) and "version" in version else None,
        family=family,
        family_reason=reason,
        tokenize=tokenize,
        extras=canvas > 0 and vocab > 0,
        canvas=canvas,
        vocab_size=vocab,
        eos_ids=eos_ids,
        control_ids=control_ids,
        file_sep=FILE_SEP in single,
        chars_per_token=per_token,
        extras_note=note,
        controls=controls,
        separator=(separator[1], separator[0]) if separator else None,
    )


def tokenize_call(model: str, text: str) -> Call:
    """The server's ids for `text` as it would tokenize it inside a prompt (no special tokens added)."""
    return Call("/tokenize", {"model": model, "prompt": text, "add_special_tokens": False})


@dataclass(frozen=True)
class Asking:
    """The probe's calls to one server, within one deadline and cancel flag."""

    client: HttpClient
    deadline: float | None
    cancel: CancelToken | None

    def replies(self, calls: list[Call]) -> list[Any]:
        """Answers or the RemoteError of each call, sent at once."""
        return self.client.calls(calls, self.deadline, self.cancel, errors=True)

    def answers(self, calls: list[Call]) -> list[dict | None]:
        """Answers to calls that may fail (None for those), sent at once."""
        answers = self.replies(calls)
        if all(isinstance(a, RemoteError) and a.kind in ("unreachable", "timeout") for a in answers):
            raise answers[0]  # the server went away mid-probe
        return [None if isinstance(a, RemoteError) else a for a in answers]


def _family(forced: str, has_fim: bool, tokenize: bool) -> tuple[str, str]:
    if forced != "auto":
        return forced, "set by the remote family option"
    if has_fim:
        return "fim", f"its tokenizer has {FIM_MIDDLE}: a dgemma-lsp checkpoint"
    if tokenize:
        return "gemma4-chat", f"its tokenizer has no {FIM_MIDDLE}: the chat prompt"
    return "gemma4-chat", "no /tokenize to tell: the chat prompt"


def _single_tokens(ask: Asking, model: str, family: str) -> dict[str, int]:
    """The family's control tokens the server's tokenizer holds as one id each (FIM: all of ours, EOS
    first; chat: the end-of-text ones), by name."""
    names = special_tokens() if family == "fim" else list(CHAT_END_TOKENS)
    if EOS in names:
        names = [EOS, *(n for n in names if n != EOS)]
    (joined,) = ask.answers([tokenize_call(model, "".join(names))])
    ids = joined.get("tokens") if isinstance(joined, dict) else None
    if isinstance(ids, list) and len(ids) == len(names):  # each one token: one call told them all
        return dict(zip(names, ids, strict=True))
    answers = ask.answers([tokenize_call(model, name) for name in names])
    return {
        name: answer["tokens"][0]
        for name, answer in zip(names, answers, strict=True)
        if isinstance(answer, dict) and len(answer.get("tokens") or []) == 1
    }


def _extras(ask: Asking, model: str) -> tuple[int, int, tuple[str, ...], str]:
    """(canvas, vocabulary, controls taken, why not) from the refusals of requests no server may take:
    each control with a value out of its range, and a seed canvas of an id past any vocabulary."""
    seeds = [_xargs_call(model, {"diffusion_seed_canvas": [PROBE_ID]})]
    answers = ask.replies([*(_xargs_call(model, {name: value}) for name, value in CONTROLS.items()), *seeds])
    by_control = dict(zip(CONTROLS, answers, strict=False))
    canvas = _refused_with_number(_CANVAS, by_control["diffusion_seed_canvas"])
    vocab = _refused_with_number(_VOCAB, answers[-1])
    controls = tuple(name for name, answer in by_control.items() if _refused_naming(name, answer))
    if canvas and vocab:
        return canvas, vocab, controls, ""
    first = answers[0]
    if isinstance(first, RemoteError) and first.kind in ("unreachable", "timeout"):
        raise first
    if isinstance(first, RemoteError):
        return 0, 0, controls, f"a seed canvas was refused otherwise: {first}"
    return 0, 0, controls, "the server ignores vllm_xargs (not a vLLM serving DiffusionGemma)"


def _xargs_call(model: str, xargs: dict[str, object]) -> Call:
    body: dict[str, Any] = {"model": model, "prompt": "x", "max_tokens": 1, "vllm_xargs": xargs}
    return Call("/v1/completions", body)


def _refused_with_number(pattern: re.Pattern[str], answer: object) -> int:
    """The number a 400 refusal's message gives where it matches `pattern` (0: no such refusal)."""
    if isinstance(answer, RemoteError) and answer.status == 400:
        found = pattern.search(str(answer))
        if found:
            return int(found.group(1))
    return 0


def _refused_naming(control: str, answer: object) -> bool:
    """Whether a 400 refusal names `control` as the value it refused: the server checks that control."""
    return (
        isinstance(answer, RemoteError)
        and answer.status == 400
        and re.search(rf"\b{control} (must|needs|ids)\b", str(answer)) is not None
    )


def estimate_tokens(text: str, chars_per_token: float) -> int:
    """Tokens `text` takes, from the server's characters per token (rounded up, never 0 for text)."""
    return math.ceil(len(text) / chars_per_token) if text else 0
