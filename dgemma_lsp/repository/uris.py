"""Which URIs name local files: only `file:` URIs with an empty or `localhost` host and an absolute path.
Anything else (`file://`, `file:c.py/..`, a host part) is refused with one log line and never resolved
against the working directory."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import unquote, urlparse

logger = logging.getLogger(__name__)

LOCAL_HOSTS = ("", "localhost")


def path_of(uri: str, quiet: bool = False, folders: dict[str, str] | None = None) -> Path | None:
    """The local path a `file:` URI names (None for any other scheme, and for a `file:` URI that names no
    local absolute path: logged unless `quiet`). `..` is resolved by name, and the links of the folders
    on the way, not a link at the end: an event for a path that is now a link names the entry it had.
    `folders` keeps the folders resolved (a caller's memo for a batch of URIs)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    path = unquote(parsed.path)
    if parsed.netloc.lower() not in LOCAL_HOSTS or not path.startswith("/") or "\0" in path:
        if not quiet:
            logger.warning("not a local file's URI (a host, or no absolute path): %s: ignored", uri)
        return None
    folder, name = os.path.split(os.path.normpath(path))
    if not name:
        return Path(folder)
    real = folders.get(folder) if folders is not None else None
    if real is None:
        real = os.path.realpath(folder)
        if folders is not None:
            folders[folder] = real
    return Path(real, name)
