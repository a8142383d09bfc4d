"""`dgemma-lsp doctor`: what a bug report needs: versions, device, which model would load, grammars."""

from __future__ import annotations

import platform
from importlib import metadata

PACKAGES = (
    "dgemma-lsp",
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "pygls",
    "lsprotocol",
    "tree-sitter",
)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _device() -> str:
    try:
        import torch
    except ImportError as err:
        return f"torch unavailable ({err})"
    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)}), {torch.get_num_threads()} CPU threads"
    if torch.backends.mps.is_available():
        return "mps"
    return f"cpu ({torch.get_num_threads()} threads)"


def _model(spec: str) -> str:
    from engine import EngineError
    from engine.loading import check_checkpoint, resolve_spec

    try:
        resolved = resolve_spec(spec)
        if resolved.kind == "remote":
            return f"{spec}: remote OpenAI-compatible server at {resolved.location}"
        from pathlib import Path

        check_checkpoint(Path(resolved.location))
    except EngineError as err:
        return f"{spec}: NOT LOADABLE: {err}"
    return f"{spec}: {resolved.location}"


def report(spec: str) -> str:
    from dgemma_lsp.documents.languages import LanguageRegistry

    registry = LanguageRegistry()
    available = registry.available()
    missing = [name for name in registry.names() if name not in available]
    lines = [f"python        {platform.python_version()} ({platform.platform()})"]
    lines += [f"{package:<13} {_version(package)}" for package in PACKAGES]
    lines.append(f"device        {_device()}")
    lines.append(f"model         {_model(spec)}")
    lines.append(f"grammars      {', '.join(available)}")
    if missing:
        errors = registry.errors()
        lines.append("no grammar    " + ", ".join(f"{name} ({errors.get(name, '?')})" for name in missing))
    return "\n".join(lines)
