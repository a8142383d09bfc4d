"""The DiffusionGemma engine: loading, prompts, the prompt cache and the infill sampler.

It knows nothing of LSP, documents or editors. Importing it is cheap: torch (and transformers, where
a checkpoint needs it) load with the first `load_engine` call.
"""

from engine.api import (
    CancelFlag,
    CancelToken,
    Candidate,
    Decoder,
    Engine,
    EngineError,
    EngineInfo,
    InfillRequest,
    InfillResult,
    Snippet,
    Timings,
)
from engine.loading import load_engine
from engine.remote_settings import RemoteSettings


def preload() -> None:
    """Import what loading a local model on a CPU needs (torch, transformers' config and cache classes):
    seconds of work a server can do while its client starts up."""
    from engine.loading import import_model_libraries

    import_model_libraries()


__all__ = [
    "CancelFlag",
    "CancelToken",
    "Candidate",
    "Decoder",
    "Engine",
    "EngineError",
    "EngineInfo",
    "InfillRequest",
    "InfillResult",
    "RemoteSettings",
    "Snippet",
    "Timings",
    "load_engine",
    "preload",
]
