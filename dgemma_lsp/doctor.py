"""`dgemma-lsp doctor`: what a bug report needs: versions, device, which model would load, grammars."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import TYPE_CHECKING

from engine.remote_settings import API_KEY_VARIABLE, RemoteSettings

if TYPE_CHECKING:
    from engine.remote_http import RemoteError

PACKAGES = (
    "dgemma-lsp",
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "pygls",
    "lsprotocol",
    "tree-sitter",
    "httpx",
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


def _model(spec: str, remote: RemoteSettings) -> tuple[str, bool]:
    """Where the model spec points, or why it cannot be used; and whether it can be."""
    from engine import EngineError
    from engine.loading import check_checkpoint, resolve_spec

    try:
        resolved = resolve_spec(spec)
        if resolved.kind == "remote":
            return _remote(resolved.location, remote)
        from pathlib import Path

        check_checkpoint(Path(resolved.location))
    except EngineError as err:
        return f"{spec}: NOT LOADABLE: {err}", False
    return f"{spec}: {resolved.location}", True


def _remote(url: str, settings: RemoteSettings) -> tuple[str, bool]:
    """What the server at `url` serves and supports (asked now), or why it cannot be used."""
    from engine.remote_http import HttpClient, RemoteError, server_base
    from engine.remote_server import probe

    key = "an API key is sent" if settings.key() else f"no API key (set {API_KEY_VARIABLE} if it needs one)"
    try:
        client = HttpClient(server_base(url), settings.key(), settings.timeout_s)
    except RemoteError as err:
        return f"{url}: NOT USABLE: {err}", False
    try:
        facts = probe(client, settings)
    except RemoteError as err:
        return f"{url}: {_failure(err)}: {err}\n  {key}", False
    finally:
        client.close()
    return "\n".join([f"{url}: remote server, {key}", *("  " + line for line in facts.describe())]), True


def _failure(err: RemoteError) -> str:
    """What a failed probe found, in a word a user can search for."""
    if err.kind in ("unreachable", "timeout"):
        return "NOT REACHABLE"
    if err.status in (401, 403):
        return "UNAUTHORIZED"
    if err.status == 404:
        return "NOT FOUND"
    if err.kind == "http":
        return f"ANSWERED HTTP {err.status}"
    return "NOT AN OPENAI-COMPATIBLE SERVER"


def report(spec: str, remote: RemoteSettings | None = None) -> tuple[str, bool]:
    """The report, and whether the model it names can be used (`doctor` exits 1 when not)."""
    from dgemma_lsp.documents.languages import LanguageRegistry

    registry = LanguageRegistry()
    available = registry.available()
    missing = [name for name in registry.names() if name not in available]
    lines = [f"python        {platform.python_version()} ({platform.platform()})"]
    lines += [f"{package:<13} {_version(package)}" for package in PACKAGES]
    lines.append(f"device        {_device()}")
    model, usable = _model(spec, remote or RemoteSettings())
    lines.append(f"model         {model}")
    lines.append(f"grammars      {', '.join(available)}")
    if missing:
        errors = registry.errors()
        lines.append("no grammar    " + ", ".join(f"{name} ({errors.get(name, '?')})" for name in missing))
    return "\n".join(lines), usable
