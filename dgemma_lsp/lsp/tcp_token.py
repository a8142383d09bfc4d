"""The secret a TCP client presents (`initializationOptions.tcpToken`) before the server reads its
workspace folders or lets it name a model server: any local user can connect to a loopback port, and
the index would read whatever the server's user can read and hand it back in completions.

It comes from DGEMMA_LSP_TOKEN when set; else it is made at start and written to a file only the
user can read: $XDG_RUNTIME_DIR/dgemma-lsp/tcp-PORT.token, or ~/.cache/dgemma-lsp/tcp-PORT.token.
The file is made private before the token is written into it, and removed when the server ends.
"""

from __future__ import annotations

import contextlib
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
    _write_private(path, token)
    return token, path


def _write_private(path: Path, token: str) -> None:
    """Write `token` into a new file created 0600 in a 0700 folder, then put it in place: a file an
    older server left (with other modes, open in another process) never holds the new token."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    fresh = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "w") as out:
            out.write(token)
        os.replace(fresh, path)
    except BaseException:
        with contextlib.suppress(OSError):
            fresh.unlink()
        raise


def remove_token(path: Path | None) -> None:
    """Remove the token file when the server ends (the next server on the port makes its own)."""
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
