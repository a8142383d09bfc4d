"""One model worker, off the event loop, where only the newest request per document matters.

Every keystroke may submit a job. A job submitted for a key (a document URI) supersedes the
previous one for that key: if it has not started it is dropped, if it is running its cancel flag
is set and the engine stops between denoising steps. The asyncio side awaits a future that is
resolved from the worker thread; a superseded job resolves to `None`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import CancelFlag, EngineError

logger = logging.getLogger(__name__)


class Superseded(Exception):
    """The job was replaced by a newer one for the same key before or while it ran."""


@dataclass(eq=False)
class Job:
    key: str
    work: Callable[[threading.Event], Any]
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    cancel: CancelFlag = field(default_factory=CancelFlag)  # a remote engine's wait wakes when it is set

    def resolve(self, value: Any = None, error: BaseException | None = None) -> None:
        def deliver() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(value)

        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            self.loop.call_soon_threadsafe(deliver)


class Scheduler:
    def __init__(self, name: str = "dgemma-model") -> None:
        self._pending: OrderedDict[str, Job] = OrderedDict()
        self._running: Job | None = None
        self._wake = threading.Condition()
        self._stopped = False
        self.superseded = 0  # counters for the benchmark and the log
        self.completed = 0
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, key: str, work: Callable[[threading.Event], Any]) -> asyncio.Future:
        """Queue `work(cancel_event)` for `key`, superseding the previous job for that key."""
        loop = asyncio.get_running_loop()
        job = Job(key=key, work=work, future=loop.create_future(), loop=loop)
        with self._wake:
            if self._stopped:
                job.future.set_exception(RuntimeError("the model worker has stopped"))
                return job.future
            previous = self._pending.pop(key, None)
            if previous is not None:
                self.superseded += 1
                previous.resolve(error=Superseded())
            if self._running is not None and self._running.key == key:
                self._running.cancel.set()
            self._pending[key] = job
            self._wake.notify()
        return job.future

    def cancel(self, future: asyncio.Future) -> None:
        """Cancel the job behind `future` ($/cancelRequest, or its awaiting task was cancelled)."""
        with self._wake:
            for key, job in list(self._pending.items()):
                if job.future is future:
                    del self._pending[key]
                    job.resolve(error=Superseded())
                    return
            if self._running is not None and self._running.future is future:
                self._running.cancel.set()

    def idle(self) -> bool:
        with self._wake:
            return self._running is None and not self._pending

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            for job in self._pending.values():
                job.resolve(error=Superseded())
            self._pending.clear()
            if self._running is not None:
                self._running.cancel.set()
            self._wake.notify()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                _, job = self._pending.popitem(last=False)
                self._running = job
            try:
                value = job.work(job.cancel)
            except EngineError as err:  # a problem with a message for the user (a remote server down)
                logger.debug("model job for %s: %s", job.key, err)  # its owner tells the user, once
                job.resolve(error=err)
            except Exception as err:  # the job's owner decides what an error means
                logger.exception("model job for %s failed", job.key)
                job.resolve(error=err)
            else:
                if job.cancel.is_set():
                    self.superseded += 1
                    job.resolve(error=Superseded())
                else:
                    self.completed += 1
                    job.resolve(value)
            finally:
                with self._wake:
                    self._running = None
