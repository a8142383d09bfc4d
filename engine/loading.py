"""`load_engine(spec)`: from a model spec to a ready engine.

A spec is `default` (the bundled model under engine/default), a local checkpoint folder, a
Hugging Face id already in the local cache (nothing is downloaded), or an http(s) URL of an
OpenAI-compatible server. Weights load from safetensors only and `trust_remote_code` stays off.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from engine.api import Engine, EngineError, EngineInfo
from engine.remote_settings import RemoteSettings

logger = logging.getLogger(__name__)

BUNDLED_MODEL_DIR = Path(__file__).parent / "default"
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
# Said after a problem with the model folder: how to fix it (the server reloads on the new option).
_FIX = "set the model option (--model) to 'default' or to a DiffusionGemma checkpoint folder"


@dataclass(frozen=True)
class ResolvedSpec:
    kind: str  # "local" or "remote"
    location: str  # a folder, or a URL
    name: str  # what the user asked for


def is_url(spec: str) -> bool:
    """Whether a model spec names a server (http or https) rather than weights on this machine."""
    return spec.strip().startswith(("http://", "https://"))


# A server's address without its scheme: a host with a port, or a path ending in the OpenAI API's /v1.
_ADDRESS = re.compile(r"^[\w.-]+:\d+(/|$)|^[\w.-]+\.[\w-]+(:\d+)?/(.+/)?v1(/.*)?$|^localhost(/|$)")


def _without_scheme(spec: str) -> str | None:
    """The error for a spec that names a server but lacks http:// or https:// (None: it does not)."""
    if not _ADDRESS.match(spec):
        return None
    return (
        f"model {spec!r} looks like a server's address without its scheme: "
        f"add http:// or https:// (https://{spec})"
    )


def resolve_spec(spec: str) -> ResolvedSpec:
    """Where a spec points, without loading anything (the `doctor` command prints this)."""
    spec = spec.strip()
    if not spec:
        raise EngineError(
            "empty model spec: use 'default', a checkpoint folder, a cached Hugging Face id or a URL"
        )
    if is_url(spec):
        return ResolvedSpec("remote", spec.rstrip("/"), spec)
    no_scheme = _without_scheme(spec)
    if no_scheme and not Path(spec).expanduser().exists():
        raise EngineError(no_scheme)
    if spec == "default":
        if not (BUNDLED_MODEL_DIR / "config.json").is_file():
            raise EngineError(
                "No bundled model is installed (engine/default has no config.json). "
                "Pass a checkpoint folder with --model, or train one with `python -m training`."
            )
        return ResolvedSpec("local", str(BUNDLED_MODEL_DIR), spec)
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise EngineError(f"{spec} is a file; --model takes the checkpoint folder that holds config.json")
        return ResolvedSpec("local", str(path.resolve()), spec)
    if spec.count("/") == 1 and not spec.startswith((".", "/", "~")):
        return ResolvedSpec("local", _cached_hub_folder(spec), spec)
    raise EngineError(
        f"model {spec!r} not found: no such folder, and not a Hugging Face id (owner/name); {_FIX}"
    )


def _cached_hub_folder(repo_id: str) -> str:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return snapshot_download(repo_id, local_files_only=True)
    except HFValidationError:
        raise EngineError(
            f"model {repo_id!r} not found: no such folder, not a Hugging Face id (owner/name) and not a URL "
            f"(a server's starts with http:// or https://); {_FIX}"
        ) from None
    except LocalEntryNotFoundError as err:
        raise EngineError(
            f"{repo_id} is not in the local Hugging Face cache and nothing is downloaded at run time. "
            f"On a machine with internet run `hf download {repo_id}` (or copy the cache), then retry."
        ) from err


def check_checkpoint(folder: Path) -> dict:
    """Refuse what we must not or cannot load, with a message that says what to do."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise EngineError(f"{folder} has no config.json: not a transformers checkpoint folder; {_FIX}")
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise EngineError(f"{config_path} is not valid JSON: {err}") from err
    model_type = config.get("model_type")
    if model_type != "diffusion_gemma":
        raise EngineError(
            f"{folder} holds a {model_type or 'unknown'} model "
            f"({', '.join(config.get('architectures') or [])}); "
            f"dgemma-lsp runs DiffusionGemma checkpoints (model_type diffusion_gemma); {_FIX}"
        )
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        pickles = [p.name for p in folder.iterdir() if p.suffix in _PICKLE_SUFFIXES]
        if pickles:
            raise EngineError(
                f"{folder} has only pickle weights ({', '.join(pickles)}), which can run code when loaded "
                "and are refused. Convert them to safetensors."
            )
        raise EngineError(
            f"{folder} has no .safetensors weights: copy the checkpoint's weights there, or {_FIX}"
        )
    return config


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EngineError(
            f"device {device!r} asked for, but this torch build sees no CUDA GPU; use device 'cpu'"
        )
    if device == "mps" and not torch.backends.mps.is_available():
        raise EngineError("device 'mps' asked for, but it is not available here; use device 'cpu'")
    if device not in ("cpu", "mps") and not device.startswith("cuda"):
        raise EngineError(f"unknown device {device!r}: use auto, cpu, cuda, cuda:N or mps")
    return device


def native_bf16(device: str) -> bool:
    """Whether this CPU computes in bf16 natively (AVX-512 BF16 or AMX): there bf16 weights halve the
    memory the matrices stream through; elsewhere bf16 is emulated and slower than fp32."""
    if device != "cpu":
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: no cheap way to tell, fp32 is the safe choice
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


# oneDNN (the bf16 matrix kernels) keeps a kernel per input shape in two caches of 1,024 entries, and a
# completion's shapes change with every prompt length and every expert's share of tokens: left at
# their defaults the server's memory grew over a session (docs/performance.md, "Memory").
def bound_kernel_caches(primitives: int = 64) -> None:
    """Cap oneDNN's per-shape kernel caches (read at their first use), unless the user set them. The
    server keeps 64 primitives, its matmuls' row counts rounded to a few buckets (docs/performance.md)."""
    os.environ.setdefault("LRU_CACHE_CAPACITY", "1")
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(primitives))


def load_engine(
    spec: str = "default",
    device: str = "auto",
    threads: int | None = None,
    remote: RemoteSettings | None = None,
) -> Engine:
    """Load the model `spec` names: 'default', a checkpoint folder, a cached Hugging Face id or a URL
    (`remote`: how to use a server, for a URL)."""
    resolved = resolve_spec(spec)
    if resolved.kind == "remote":
        from engine.remote_engine import RemoteEngine

        return RemoteEngine(resolved.location, remote)
    return _load_local(resolved, pick_device(device), threads)


def import_model_libraries() -> None:
    """What loading a checkpoint on a CPU imports: torch and the engine's fused layers; transformers
    only where a checkpoint has no fused_config.json beside its weights (its config classes then)."""
    import importlib

    for module in _CPU_LOADING_MODULES:
        importlib.import_module(module)


_CPU_LOADING_MODULES = (
    "torch",
    "safetensors.torch",
    "engine.local_engine",
    "engine.fused_model",
    "engine.checkpoint_weights",
)


def _load_local(resolved: ResolvedSpec, device: str, threads: int | None) -> Engine:
    import torch
    from safetensors import SafetensorError

    from engine import fused_config
    from engine.backbone import Backbone, ModuleBackbone
    from engine.fused_model import unsupported_reason
    from engine.local_engine import LocalEngine

    folder = Path(resolved.location)
    config = check_checkpoint(folder)
    dtype = torch.bfloat16 if device.startswith("cuda") or native_bf16(device) else torch.float32
    if dtype == torch.bfloat16 and device == "cpu":
        bound_kernel_caches()
    prompt_format = _prompt_format(folder)
    try:
        # The config the fused layers need, saved beside the weights at export; else transformers reads it.
        text = fused_config.read(folder) or text_config(config)
        tied = bool(config.get("tie_word_embeddings", True))
        reason = unsupported_reason(text, tied, device)
        if reason is None:
            backbone: Backbone = _fused_model(folder, config, text, tied, dtype)
        else:
            logger.info("transformers' modules run %s: the fused layers do not support %s", folder, reason)
            model = _transformers_model(folder, dtype)
    except (SafetensorError, OSError, ValueError, RuntimeError, KeyError) as err:
        raise EngineError(
            f"could not load the weights in {folder}: {err}. The files may be truncated or corrupt: "
            "copy or download the checkpoint again"
        ) from err
    if reason is not None:
        backbone = ModuleBackbone(model.to(device))
    parameters = backbone.parameter_count
    torch.set_num_threads(threads or auto_threads(device, parameters))
    vocab = backbone.text_config.vocab_size
    if prompt_format.vocab_size > vocab:
        raise EngineError(
            f"the tokenizer in {folder} has {prompt_format.vocab_size} tokens but the model only {vocab}: "
            "they do not belong together; put the tokenizer.json saved with these weights in the folder"
        )
    record = training_record(folder)
    info = EngineInfo(
        name=resolved.name,
        source=str(folder),
        family=prompt_format.family,
        device=device,
        dtype=str(dtype).removeprefix("torch."),
        canvas_length=backbone.canvas_length,
        parameters=parameters,
        reads_context=prompt_format.family != "fim" or trained_with_context(record),
        gates=read_gates(folder),
        decision=read_decision(folder),
        languages=trained_languages(record),
    )
    logger.info("loaded %s from %s on %s", resolved.name, folder, device)
    engine = LocalEngine(backbone, prompt_format, sampler_settings(folder), info)
    engine.warm_up()
    return engine


def text_config(config: dict):
    """The text half of a checkpoint's config.json as transformers reads it (DiffusionGemmaTextConfig),
    without building the whole DiffusionGemmaConfig, whose Gemma 4 vision half imports transformers'
    activation and model-loading modules (most of a second)."""
    from transformers.models.diffusion_gemma.configuration_diffusion_gemma import DiffusionGemmaTextConfig

    return DiffusionGemmaTextConfig(**config.get("text_config", {}))


# DiffusionGemmaConfig's own default, for a config.json that does not say.
DEFAULT_CANVAS_LENGTH = 256


def _fused_model(folder: Path, config: dict, text, tied: bool, dtype):
    """The fused layers straight from the safetensors: transformers' modeling module is never imported."""
    from engine.checkpoint_weights import read_text_weights
    from engine.fused_model import FusedModel

    weights, parameters = read_text_weights(folder, dtype)
    canvas = int(config.get("canvas_length") or DEFAULT_CANVAS_LENGTH)
    return FusedModel(weights, text, canvas, parameters, tied)


def _transformers_model(folder: Path, dtype):
    """transformers' model class, for devices and variants the fused layers do not cover."""
    from transformers import DiffusionGemmaForBlockDiffusion
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the server's stderr is a log, not a terminal
    return DiffusionGemmaForBlockDiffusion.from_pretrained(
        folder, dtype=dtype, use_safetensors=True, local_files_only=True
    )


CALIBRATION_FILE = "calibration.json"
GATES = ("min_mean_confidence_percent", "min_line_confidence_percent", "min_next_token_confidence_percent")


def training_record(folder: Path) -> dict:
    """The training.json of the run that made the checkpoint in `folder` ({} for one made elsewhere),
    read once per load."""
    try:
        record = json.loads((folder / "training.json").read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def trained_with_context(record: dict) -> bool:
    """Did the run put other files' snippets in its prompts (training.json's context_share)?"""
    try:
        return float(record.get("config", {}).get("context_share", 0.0)) > 0
    except (ValueError, TypeError, AttributeError):
        return False


def trained_languages(record: dict) -> tuple[str, ...] | None:
    """The languages the run trained on (training.json's language weights); None for a checkpoint made
    elsewhere, which is taken to know them all."""
    try:
        weights = record["config"]["language_weights"]
        return tuple(sorted(str(name) for name, weight in weights.items() if float(weight) > 0))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


DECISION_FILE = "decision.json"


def read_decision(folder: Path) -> dict:
    """The show-or-not decision fitted for the checkpoint in `folder` (its decision.json), or {}."""
    path = folder / DECISION_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data.get("weights"), dict) or not isinstance(data.get("bias"), int | float):
            raise ValueError("it needs weights (by feature name) and a bias")
        return data
    except (OSError, ValueError, TypeError, AttributeError) as err:
        logger.warning("ignoring %s: %s", path, err)
        return {}


def read_gates(folder: Path) -> dict[str, int]:
    """The confidence gates calibrated for the checkpoint in `folder` (`dgemma-lsp eval --calibrate`)."""
    path = folder / CALIBRATION_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        # A gate the file does not name (calibrated before it existed) stays open.
        return {key: int(data[key]) for key in GATES if key in data and 0 <= int(data[key]) <= 100}
    except (OSError, ValueError, TypeError, KeyError) as err:
        logger.warning("ignoring %s: %s", path, err)
        return {}


SMALL_MODEL = 50_000_000


def auto_threads(device: str, parameters: int) -> int:
    """CPU threads when the user sets none.

    A small model's matrices are too small to gain from more threads, and torch's threads stall
    badly when other programs (the editor, a build) share the cores: they spin at every barrier.
    """
    import os

    import torch

    if device != "cpu" or parameters >= SMALL_MODEL:
        return torch.get_num_threads()
    return 1 if (os.cpu_count() or 1) <= 4 else 2


def _prompt_format(folder: Path):
    from engine.prompts import FimFormat, Gemma4ChatFormat
    from engine.tokenizer import FIM_MIDDLE, load_tokenizer

    path = folder / "tokenizer.json"
    if not path.is_file():
        raise EngineError(f"{folder} has no tokenizer.json")
    try:
        tokenizer = load_tokenizer(path)
    except Exception as err:  # the tokenizers library raises a bare Exception on bad files
        raise EngineError(f"{path} is not a valid tokenizer file: {err}") from err
    if tokenizer.token_to_id(FIM_MIDDLE) is not None:
        return FimFormat(tokenizer)
    from transformers import AutoTokenizer

    return Gemma4ChatFormat(AutoTokenizer.from_pretrained(folder, local_files_only=True))


def sampler_settings(folder: Path):
    """Sampler defaults from the checkpoint's generation config (generation_config.json), where it sets
    them (the file's fields default to unset, so reading the JSON is what transformers' class reads)."""
    from engine.sampler import SamplerSettings

    path = folder / "generation_config.json"
    try:
        config = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, json.JSONDecodeError) as err:
        raise EngineError(f"{path} is not valid JSON: {err}") from err
    defaults = SamplerSettings()
    sampler_config = config.get("sampler_config")
    bound = sampler_config.get("entropy_bound") if isinstance(sampler_config, dict) else None
    return SamplerSettings(
        max_steps=config.get("max_denoising_steps") or defaults.max_steps,
        entropy_bound=bound or defaults.entropy_bound,
        t_max=config.get("t_max") or defaults.t_max,
        t_min=config.get("t_min") or defaults.t_min,
        stability_steps=config.get("stability_threshold") or defaults.stability_steps,
        confidence_threshold=config.get("confidence_threshold") or defaults.confidence_threshold,
    )
