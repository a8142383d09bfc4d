"""`dgemma/resolving` and `dgemma/confidence` through the real server over stdio, with pytest-lsp's real
client: a slow random-weight model of the released architecture (tests/slow_model.py) for the partials,
the tiny one for the confidence of final answers."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from lsprotocol import types

from dgemma_lsp.lsp import messages
from tests.lsp_session import change, lsp_session, open_document
from tests.slow_model import build_slow_checkpoint

URI = "file:///work/stats.py"
TEXT = (
    "import math\n\n\n"
    "def mean(values):\n"
    "    return sum(values) / len(values)\n\n\n"
    "def spread(values):\n"
    "    middle = mean(values)\n"
    "    deviations = [v - middle for v in values]\n"
    "    return math.sqrt(sum(d * d for d in deviations) / len(values))\n\n\n"
    "def describe(values):\n"
    "    low, high = "
)
LINE, CHARACTER = 14, len("    low, high = ")
# No deadline (answers are then deterministic), and no drafts: every answer of the random model runs all
# its denoising steps, so every completion is slow.
SLOW = {"completion": {"latencyBudgetMs": 0, "drafts": False, "nextTokenDraft": False}}
RESOLVING = {messages.RESOLVING.removeprefix("dgemma/"): True}
CONFIDENCE = {messages.CONFIDENCE.removeprefix("dgemma/"): True}


@pytest.fixture(scope="module")
def slow_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_slow_checkpoint(tmp_path_factory.mktemp("slow-model"))


class Heard:
    """The dgemma/resolving and dgemma/confidence notifications a client received, with their arrival
    times, and in one sequence with the responses awaited through `ask` (in the order they came)."""

    def __init__(self, client) -> None:
        self.client = client
        self.events: list[tuple[str, object, float]] = []  # (kind, payload, monotonic arrival)

        @client.feature(messages.RESOLVING)
        def on_partial(params) -> None:
            self.events.append(("partial", params, time.monotonic()))

        @client.feature(messages.CONFIDENCE)
        def on_confidence(params) -> None:
            self.events.append(("confidence", params, time.monotonic()))

    def partials(self, request_id: str | None = None) -> list[tuple[object, float]]:
        return [
            (p, t) for kind, p, t in self.events if kind == "partial" and request_id in (None, p.requestId)
        ]

    def request(self, line: int = LINE, character: int = CHARACTER) -> tuple[str, float, asyncio.Future]:
        """Send an inline completion request with an id of ours; its response is recorded when it comes."""
        msg_id = str(uuid.uuid4())
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        )
        sent = time.monotonic()
        future = asyncio.ensure_future(
            self.client.protocol.send_request_async(
                types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id
            )
        )
        future.add_done_callback(lambda f: self.events.append(("response", msg_id, time.monotonic())))
        return msg_id, sent, future

    async def round_trip(self) -> None:
        """A request the server answers at once: every message sent before it has been handled."""
        await asyncio.wait_for(self.client.protocol.send_request_async(messages.STATS, {}), 60)
        self.events.append(("stats", None, time.monotonic()))


def texts(result: types.InlineCompletionList | None) -> list[tuple[str, int, int]]:
    items = result.items if result is not None else []
    return [(i.insert_text, i.range.start.line, i.range.start.character) for i in items]


async def slow_completion(model: Path, experimental: dict) -> tuple[Heard, str, list, float, float]:
    """One completion at the cursor of TEXT: what was heard, the request's id, the answer, and when it
    was asked and came."""
    async with lsp_session(model, options=SLOW, experimental=experimental) as (client, _):
        heard = Heard(client)
        open_document(client, URI, TEXT)
        msg_id, sent, future = heard.request()
        result = await asyncio.wait_for(future, 120)
        answered = time.monotonic()
        return heard, msg_id, texts(result), sent, answered


async def test_a_declaring_client_sees_the_canvas_settle_and_gets_the_same_answer(slow_model_dir):
    heard, msg_id, answer, sent, answered = await slow_completion(slow_model_dir, RESOLVING)
    assert answer, "the model offered nothing"
    partials = heard.partials()
    assert partials, f"no dgemma/resolving in {answered - sent:.2f} s"
    arrivals = [t for _, t in partials]
    assert arrivals[0] - sent >= 0.1  # none before the completion has run 100 ms
    assert all(t <= answered for t in arrivals)  # none after the answer
    # At most one per 50 ms after the first 100 ms, on the server's clock; this client may read two at
    # once when it is slow, so the bound is on their number within the time the answer took.
    assert len(partials) <= (answered - sent - 0.1) / 0.05 + 1
    first = partials[0][0]
    assert first.textDocument.uri == URI and first.version == 1
    assert (first.position.line, first.position.character) == (LINE, CHARACTER)
    assert {p.requestId for p, _ in partials} == {msg_id}
    for params, _ in partials:
        assert params.spans and all(isinstance(s.text, str) and s.text for s in params.spans)
        assert all(isinstance(s.settled, bool) for s in params.spans)
        assert "\n" not in "".join(s.text for s in params.spans)  # a single-line request's partial
    print(
        f"\nfirst dgemma/resolving {1000 * (arrivals[0] - sent):.0f} ms after the request, "
        f"{len(partials)} partials, answer {1000 * (answered - sent):.0f} ms"
    )
    plain, _, plain_answer, _, _ = await slow_completion(slow_model_dir, {})
    assert plain_answer == answer  # the notifications change nothing of the answer
    assert plain.partials() == []  # and a client that did not declare them gets none


@pytest.mark.parametrize("what", ["a newer request", "an edit alone", "a cancel"])
async def test_partials_stop_once_the_server_has_read(slow_model_dir, what):
    async with lsp_session(slow_model_dir, options=SLOW, experimental=RESOLVING) as (client, _):
        heard = Heard(client)
        open_document(client, URI, TEXT)
        old, _, old_future = heard.request()
        await _until(lambda: heard.partials(old), "a first partial")
        futures = [old_future]
        if what == "a cancel":
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=old))
        else:
            change(client, URI, 2, LINE, CHARACTER, LINE, CHARACTER, "m")  # the user types on
        if what == "a newer request":  # as an editor asks at each key
            new, _, new_future = heard.request(character=CHARACTER + 1)
            futures.append(new_future)
        await heard.round_trip()
        after = len(heard.events)
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 120)
        late = [p for kind, p, _ in heard.events[after:] if kind == "partial" and p.requestId == old]
        assert late == []  # nothing of the old request once the server has read the change or cancel
        if what == "a newer request":
            assert heard.partials(new), "the newer request showed no partial"
        elif what == "an edit alone":
            assert texts(results[0]) == []  # the answer for the old text is stale
        else:
            assert isinstance(results[0], Exception)  # answered RequestCancelled


async def test_confidence_comes_before_the_answer_to_a_declaring_client_only(slow_model_dir):
    async with lsp_session(slow_model_dir, options=SLOW, experimental=CONFIDENCE) as (client, _):
        heard = Heard(client)
        open_document(client, URI, TEXT)
        msg_id, _, future = heard.request()
        result = await asyncio.wait_for(future, 120)
        assert result.items, "the model offered nothing"
        kinds = [kind for kind, _, _ in heard.events]
        assert kinds == ["confidence", "response"]  # before the answer, at once, and no partials
        params = heard.events[0][1]
        assert params.requestId == msg_id and params.textDocument.uri == URI and params.version == 1
        item = params.items[0]
        assert item.insertText == result.items[0].insert_text
        # Random weights are sure of nothing: the whole text is below the threshold.
        assert [list(r) for r in item.low] == [[0, len(item.insertText)]]
    off = {"completion": {**SLOW["completion"], "showConfidence": False}}
    async with lsp_session(slow_model_dir, options=off, experimental=CONFIDENCE) as (client, _):
        heard = Heard(client)
        open_document(client, URI, TEXT)
        _, _, future = heard.request()
        assert (await asyncio.wait_for(future, 120)).items
        assert [kind for kind, _, _ in heard.events] == ["response"]


async def _until(predicate, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
