"""The secret a TCP client presents (`initializationOptions.tcpToken`) before the server reads its
workspace folders: any local user can connect to a loopback port, and the index would read whatever
the server's user can read and hand it back in completions.

It comes from DGEMMA_LSP_TOKEN when set; else it is made at start and written to a file only the
user can read: $XDG_RUNTIME_DIR/dgemma-lsp/tcp-PORT.token, or ~/.cache/dgemma-lsp/tcp-PORT.token.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TOKEN_ENV = "DGEMMA_LSP_TOKEN"


def token_file(port: int) -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or str(Path.home() / ".cache")
    return Path(base) / "dgemma-lsp" / f"tcp-{port}.token"


def serving_token(port: int) -> tuple[str, Path | None]:
    """(the token, the file it was written to; None when it came from the environment)."""
    given = os.environ.get(TOKEN_ENV)
    if given:
        return given, None
    token = secrets.token_urlsafe(32)
    path = token_file(port)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(token)
    os.chmod(path, 0o600)  # an older file may have had other modes
    return token, path
