"""What a user may set for a remote engine (the rest is asked of the server): cheap to import."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from engine.api import EngineError

API_KEY_VARIABLE = "DGEMMA_API_KEY"
FAMILIES = ("auto", "fim", "gemma4-chat")
DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RemoteSettings:
    """The prompt family (auto: from the server's tokenizer), the API key, the timeout of a call."""

    family: str = "auto"
    api_key: str | None = field(default=None, repr=False)  # None: the DGEMMA_API_KEY variable
    timeout_s: float = DEFAULT_TIMEOUT_S  # a call with no deadline of its own
    environment_key: bool = True  # False: the server was named by a client it must not hand the key

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise EngineError(f"remote family {self.family!r} is not one of {', '.join(FAMILIES)}")

    def key(self) -> str | None:
        """The API key: the option, else the environment variable (where allowed), else none."""
        from_environment = os.environ.get(API_KEY_VARIABLE) if self.environment_key else None
        return self.api_key or from_environment or None
