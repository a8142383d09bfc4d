"""The runtime pieces the end-to-end tests reach only indirectly: the model host, the rewrite service,
the stats, and the conversions to LSP types."""

from __future__ import annotations

import asyncio
import gc
import threading

from lsprotocol import types

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.positions import LineIndex, PositionEncoding
from dgemma_lsp.documents.text_sync import Document
from dgemma_lsp.documents.workspace import Workspace
from dgemma_lsp.inline.proposal import Proposal
from dgemma_lsp.lsp import to_lsp
from dgemma_lsp.lsp.server import DgemmaServer
from dgemma_lsp.rewrite.service import RewriteService
from dgemma_lsp.rewrite.targets import Change, Target
from dgemma_lsp.runtime.model_host import ModelChoice, ModelHost, ModelState
from dgemma_lsp.runtime.options import Options
from dgemma_lsp.runtime.scheduler import Scheduler
from dgemma_lsp.runtime.stats import Stats, record
from engine import EngineError, InfillResult, Timings

CHOICE = ModelChoice(spec="a", device="cpu", threads=1)


class Engine:
    """A stand-in engine (no model needed to test the host's life cycle)."""

    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    def close(self) -> None:
        self.closed = True


async def test_the_model_host_loads_switches_and_reports_failures():
    gate = threading.Event()

    def loader(choice: ModelChoice):
        if choice.spec == "broken":
            raise EngineError("no such model: say how to fix it")
        if choice.spec == "slow":
            gate.wait(10)
        return Engine(choice.spec)

    scheduler = Scheduler()
    host = ModelHost(scheduler, loader)
    assert host.state is ModelState.NONE and not host.ready
    gc.unfreeze()
    assert await host.load(CHOICE) and host.ready and host.engine.name == "a"
    assert gc.get_freeze_count() > 0  # what the load left is out of the collector's scans
    first = host.engine
    # A load superseded by a newer choice reports False; the newest one wins, the old engine is closed.
    slow = asyncio.ensure_future(host.load(ModelChoice("slow", "cpu", 1)))
    await asyncio.sleep(0.05)
    newer = asyncio.ensure_future(host.load(ModelChoice("b", "cpu", 1)))
    gate.set()
    assert await newer and not await slow
    assert host.engine.name == "b" and first.closed
    assert not await host.load(ModelChoice("broken", "cpu", 1))
    assert host.state is ModelState.FAILED and "say how to fix it" in host.error and not host.ready
    scheduler.stop()
    gc.unfreeze()


def _result(text: str, steps: int = 3) -> InfillResult:
    from engine import Candidate

    candidate = Candidate(text=text, token_ids=(1, 2), confidence=(0.5, 0.7))
    return InfillResult((candidate,), steps, 1.0, "converged", Timings(1.0, 2.0, 3.0, 2.5), 10, 9)


class RewritingEngine:
    """Answers every request with a fixed rewrite, recording what it was asked (the model's part is
    tested with the real tiny model in test_rewrite.py)."""

    def __init__(self, text: str) -> None:
        self.text, self.requests = text, []

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 1

    def infill(self, request):
        self.requests.append(request)
        return _result(self.text)


async def test_the_rewrite_service_answers_the_smallest_changes_and_drops_stale_ones():
    workspace = Workspace(LanguageRegistry(), "utf-16")
    text = "def f(x):\n    return x + 1\n"
    opened = workspace.open("file:///r.py", "python", 1, text)
    target = Target(start=10, end=len(text) - 1, text=text[10:-1])
    engine = RewritingEngine("    return x * 2")
    service = RewriteService(Scheduler())
    rewritten = await service.rewrite(opened, target, Options(), engine, lambda: True)
    at = len("def f(x):\n    return x ")
    assert rewritten.changes == [Change(at, at + 1, "*"), Change(at + 2, at + 3, "2")]  # word by word
    assert rewritten.confidence == 0.6
    request = engine.requests[0]
    assert request.seed_canvas == target.text and request.seed_noise == 0.3 and request.deadline is not None
    stale = await service.rewrite(opened, target, Options(), engine, lambda: False)
    assert stale is None  # the document moved on while the model worked
    service.scheduler.stop()


def test_stats_summarise_latency_sources_and_prompt_reuse():
    stats = Stats()
    stats.add(record("model", False, 50.0, _result("a"), queued_ms=5.0))
    stats.add(record("model", True, 150.0, _result("b", steps=5)))
    stats.add(record("typed_through", False, 2.0, None))
    summary = stats.summary(superseded=4)
    assert summary["answered"] == 3 and summary["superseded"] == 4
    assert summary["sources"] == {"model": 2, "typed_through": 1}
    assert summary["single_line"]["n"] == 2 and summary["multi_line"]["p50_ms"] == 150.0
    assert summary["model_answers"]["n"] == 2 and summary["model_answers"]["p50_ms"] == 150.0  # not the 2 ms
    assert (
        summary["steps_mean"] == 4.0
        and summary["prompt_tokens"] == 20
        and summary["reused_prompt_tokens"] == 18
    )
    assert (
        summary["overhead"]["p50_ms"] == 42.0
    )  # the server's time outside the 3 ms engine call and 5 queued
    assert summary["sampler"]["p50_ms"] == 0.5  # the engine's 3 ms minus its 2.5 ms of forward passes
    stats.reset()
    assert stats.summary(superseded=0)["answered"] == 0


def test_conversions_use_the_clients_position_encoding():
    document = Document("file:///c.py", "python", 3, LineIndex("s = '😀'\nx\n"))
    for encoding, after_emoji in ((PositionEncoding.UTF16, 7), (PositionEncoding.UTF8, 9)):
        listed = to_lsp.inline_completion_list((Proposal("y", 9, 0.5),), document, encoding)
        assert listed.items[0].insert_text == "y"
        at = types.Position(line=1, character=1)
        assert listed.items[0].range == types.Range(start=at, end=at)
        assert to_lsp.position(document, 6, encoding) == types.Position(line=0, character=after_emoji)
    edit = to_lsp.workspace_edit("file:///c.py", 3, [Change(0, 1, "t")], document, PositionEncoding.UTF16)
    [change] = edit.document_changes
    assert change.text_document.version == 3 and change.edits[0].new_text == "t"
    span = to_lsp.range_of(document, 0, 1, PositionEncoding.UTF16)
    assert to_lsp.plain(span) == {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}


async def test_work_started_in_the_background_is_held_until_done_and_its_failure_logged(caplog):
    server = DgemmaServer()  # no client attached: the log message to the editor is skipped

    async def start_speculating() -> None:
        await asyncio.sleep(0)
        raise ValueError("the model worker is gone")

    server.in_background(start_speculating())
    assert len(server._background) == 1  # the loop alone would keep only a weak reference
    await asyncio.sleep(0.01)
    assert not server._background
    assert "start_speculating: the model worker is gone" in caplog.text
