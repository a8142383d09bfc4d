"""The engine's life in the server: loaded in the background, swapped when the options change.

Loading runs as a job on the model worker, so it never overlaps a completion and the event loop
stays free (the first `import torch` alone takes seconds). Until the engine is ready, completion
requests get an empty answer instead of waiting.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from dgemma_lsp.runtime.options import Options
from dgemma_lsp.runtime.scheduler import Scheduler, Superseded
from engine import Engine, EngineError, RemoteSettings
from engine.api import AllocationWindow
from engine.loading import is_url

logger = logging.getLogger(__name__)

MODEL_JOB = "<model>"


class ModelState(Enum):
    NONE = "none"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True)
class ModelChoice:
    spec: str
    device: str
    threads: int
    remote: RemoteSettings = field(default_factory=RemoteSettings)  # for a URL

    @classmethod
    def of(cls, options: Options, server_key: bool = True) -> ModelChoice:
        """`server_key`: whether the server's own key (DGEMMA_API_KEY) may be sent to this URL: the
        one its command line names, or one a trusted client names; never an untrusted client's."""
        remote = RemoteSettings(
            family=options.remote.family, api_key=options.remote.api_key or None, environment_key=server_key
        )
        return cls(spec=options.model, device=options.device, threads=options.threads, remote=remote)

    @property
    def is_remote(self) -> bool:
        return is_url(self.spec)


Loader = Callable[[ModelChoice], Engine]


def _preload() -> None:
    from engine import preload

    try:
        preload()
    except Exception as err:  # the load proper reports what is wrong, with advice
        logger.debug("preloading the model libraries failed: %s", err)


def load_with_engine_package(choice: ModelChoice) -> Engine:
    from engine import load_engine

    threads = choice.threads or None
    return load_engine(choice.spec, device=choice.device, threads=threads, remote=choice.remote)


class ModelHost:
    def __init__(
        self,
        scheduler: Scheduler,
        loader: Loader = load_with_engine_package,
        window: AllocationWindow | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.loader = loader
        self.window = window  # the heap policy each loaded engine runs its long prefills in
        self._preloading: threading.Thread | None = None
        self.state = ModelState.NONE
        self.engine: Engine | None = None
        self.choice: ModelChoice | None = None
        self.error: str | None = None

    @property
    def ready(self) -> bool:
        return self.state is ModelState.READY and self.engine is not None

    def preload(self) -> None:
        """Import the model libraries (seconds of work) in the background, before any load is asked for:
        started with the process, so the client's startup and `initialize` overlap with it."""
        self._preloading = threading.Thread(target=_preload, name="dgemma-preload", daemon=True)
        self._preloading.start()

    async def load(self, choice: ModelChoice) -> bool:
        """Load (or switch to) `choice`; True when it is ready. Errors are kept in `self.error`."""
        self.state, self.choice, self.error = ModelState.LOADING, choice, None

        def work(cancel) -> Engine:  # a load, once started, runs to its end
            if self._preloading is not None:
                self._preloading.join()  # one thread imports the libraries, never two at once
            if self.engine is not None:
                self.engine.close()
                self.engine = None
                gc.unfreeze()  # the old engine's objects may be collected again
            engine = self.loader(choice)
            if self.window is not None:
                engine.use_allocation_window(self.window)
            # What is loaded now (libraries and model, hundreds of thousands of objects) lives as long as
            # the engine: out of the garbage collector's scans, a full collection no longer walks it in the
            # middle of a completion.
            gc.freeze()
            return engine

        try:
            engine = await self.scheduler.submit(MODEL_JOB, work)
        except Superseded:
            return False  # a newer choice is loading
        except EngineError as err:
            self.state, self.error = ModelState.FAILED, str(err)
            return False
        except Exception as err:  # an unexpected failure must not take the server down
            logger.exception("loading %s failed", choice.spec)
            self.state, self.error = ModelState.FAILED, f"{type(err).__name__}: {err}"
            return False
        if self.choice != choice:
            return False
        self.engine, self.state = engine, ModelState.READY
        return True
