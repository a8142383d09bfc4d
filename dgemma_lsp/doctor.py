"""`dgemma-lsp doctor`: what a bug report needs: versions, device, which model would load, grammars."""

from __future__ import annotations

import platform
from importlib import metadata

from engine.remote_settings import API_KEY_VARIABLE, RemoteSettings

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


def _model(spec: str, remote: RemoteSettings) -> str:
    from engine import EngineError
    from engine.loading import check_checkpoint, resolve_spec

    try:
        resolved = resolve_spec(spec)
        if resolved.kind == "remote":
            return _remote(resolved.location, remote)
        from pathlib import Path

        check_checkpoint(Path(resolved.location))
    except EngineError as err:
        return f"{spec}: NOT LOADABLE: {err}"
    return f"{spec}: {resolved.location}"


def _remote(url: str, settings: RemoteSettings) -> str:
    """What the server at `url` serves and supports (asked now), or why it cannot be used."""
    from engine.remote_http import HttpClient, RemoteError, server_base
    from engine.remote_server import probe

    try:
        client = HttpClient(server_base(url), settings.key(), settings.timeout_s)
    except RemoteError as err:
        return f"{url}: NOT USABLE: {err}"
    try:
        facts = probe(client, settings)
    except RemoteError as err:
        return f"{url}: NOT REACHABLE: {err}"
    finally:
        client.close()
    key = "an API key is sent" if settings.key() else f"no API key (set {API_KEY_VARIABLE} if it needs one)"
    return "\n".join([f"{url}: remote server, {key}", *("  " + line for line in facts.describe())])


def report(spec: str, remote: RemoteSettings | None = None) -> str:
    from dgemma_lsp.documents.languages import LanguageRegistry

    registry = LanguageRegistry()
    available = registry.available()
    missing = [name for name in registry.names() if name not in available]
    lines = [f"python        {platform.python_version()} ({platform.platform()})"]
    lines += [f"{package:<13} {_version(package)}" for package in PACKAGES]
    lines.append(f"device        {_device()}")
    lines.append(f"model         {_model(spec, remote or RemoteSettings())}")
    lines.append(f"grammars      {', '.join(available)}")
    if missing:
        errors = registry.errors()
        lines.append("no grammar    " + ", ".join(f"{name} ({errors.get(name, '?')})" for name in missing))
    return "\n".join(lines)
