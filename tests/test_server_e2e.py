"""The real server over stdio, driven by pytest-lsp's real client, with the tiny test model."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from dgemma_lsp.runtime.stats import MODEL_SOURCES
from tests.lsp_session import change, inline, lsp_session, open_document

SOURCE = "import textwrap\n\ndef shorten(text, width):\n    words = text.split()\n    \n    return result\n"
URI = "file:///project/example.py"


class _Negative(int):
    """lsprotocol validates positions when they are built; this one slips through to the wire as -1."""

    def __ge__(self, other):
        return True


NEGATIVE = _Negative(-1)


async def test_capabilities_and_completion_after_incremental_edits(tiny_model_dir):
    async with lsp_session(tiny_model_dir) as (client, init):
        caps = init.capabilities
        assert caps.inline_completion_provider is not None
        sync = caps.text_document_sync
        assert sync.change == types.TextDocumentSyncKind.Incremental
        assert caps.position_encoding == types.PositionEncodingKind.Utf16
        # The model loaded in the background under a $/progress begin ... end.
        reports = [report for token_reports in client.progress_reports.values() for report in token_reports]
        assert reports[0].kind == "begin" and reports[-1].kind == "end"
        assert "Loading model" in reports[0].title

        open_document(client, URI, SOURCE)
        # Type "out = " on the empty line (line 4) in three incremental edits, then a correction.
        change(client, URI, 2, 4, 4, 4, 4, "ou")
        change(client, URI, 3, 4, 6, 4, 6, "t =")
        change(client, URI, 4, 4, 9, 4, 9, " ")
        change(client, URI, 5, 4, 4, 4, 7, "result")  # "out" -> "result"
        result = await inline(client, URI, 4, 13)
        assert result is not None and result.items, "the tiny model always writes something here"
        for item in result.items:
            assert item.range == types.Range(
                start=types.Position(line=4, character=13), end=types.Position(line=4, character=13)
            )
            assert item.insert_text.strip()
            assert "\n" not in item.insert_text  # code follows on the next line: a single-line completion
        # The status notification tells an editor's status bar the model, the device and the last latency.
        last = client.statuses[-1]
        assert last.state == "ready" and last.device == "cpu" and last.model == str(tiny_model_dir)
        assert last.lastLatencyMs > 0


EMOJI_SOURCE = "def greet():\n    s = '😀 你好 😀' + name\n    return s\n"


# What each client offers, in its order: Neovim, VS Code (none: utf-16), lsp-mode (utf-32 first).
OFFERS = {"utf-8": ["utf-8", "utf-16"], "utf-16": None, "utf-32": ["utf-32", "utf-8", "utf-16"]}


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
async def test_position_encoding_is_the_first_the_client_offers(tiny_model_dir, encoding):
    async with lsp_session(tiny_model_dir, encodings=OFFERS[encoding]) as (_, init):
        assert init.capabilities.position_encoding == encoding


UNIT_BYTES = {"utf-8": 1, "utf-16": 2, "utf-32": 4}


def width(text: str, encoding: str) -> int:
    """The length of `text` in LSP characters of `encoding` (counted here apart from the server's code)."""
    codec = encoding if encoding == "utf-8" else f"{encoding}-le"
    return len(text.encode(codec)) // UNIT_BYTES[encoding]


async def test_utf8_utf16_and_utf32_sessions_give_the_same_edit(tiny_model_dir):
    line = EMOJI_SOURCE.split("\n")[1]
    typed_at = line.index("😀") + 1  # right after the first emoji: positions past it differ by encoding
    answers = {}
    for encoding in OFFERS:
        # No deadline: how many steps fit in a time budget varies from run to run. The raw text, three
        # rows: the random tiny model's first row is often cut to nothing, and positions are the point.
        no_deadline = {"completion": {"latencyBudgetMs": 0, "candidates": 3, "syntaxRepair": False}}
        session = lsp_session(tiny_model_dir, encodings=OFFERS[encoding], options=no_deadline)
        async with session as (client, init):
            assert init.capabilities.position_encoding == encoding
            open_document(client, URI, EMOJI_SOURCE)
            at = width(line[:typed_at], encoding)
            change(client, URI, 2, 1, at, 1, at, "🙂")  # a character outside the BMP, typed mid-line
            end = width(line[:typed_at] + "🙂" + line[typed_at:], encoding)
            result = await inline(client, URI, 1, end)
            assert result is not None and result.items
            item = result.items[0]
            assert item.range.start == item.range.end == types.Position(line=1, character=end)
            answers[encoding] = item.insert_text
    assert answers["utf-8"] == answers["utf-16"] == answers["utf-32"]


async def test_bad_requests_get_errors_or_nothing_and_the_server_keeps_serving(tiny_model_dir):
    async with lsp_session(tiny_model_dir) as (client, _):
        open_document(client, URI, SOURCE)
        with pytest.raises(JsonRpcException, match="not open"):
            await inline(client, "file:///nowhere.py", 0, 0)
        with pytest.raises(JsonRpcException):
            await inline(client, URI, NEGATIVE, 0)
        # Past the end of a line or of the file is clamped, as LSP says, and answered.
        beyond = await inline(client, URI, 99, 99)
        assert beyond is not None
        # A language without a grammar falls back to plain windows and is still answered.
        open_document(client, "file:///notes.txt", "first line\nsecond ", language="plaintext")
        plain = await inline(client, "file:///notes.txt", 1, 7)
        assert plain is not None
        # An out-of-range change is clamped; an inverted range drops the document, not the server.
        change(client, URI, 2, 500, 0, 500, 0, "# appended\n")
        change(client, URI, 3, 3, 0, 1, 0, "x")
        with pytest.raises(JsonRpcException, match="not open"):
            await inline(client, URI, 0, 0)
        # Still serving.
        open_document(client, URI, SOURCE)
        again = await inline(client, URI, 4, 4)
        assert again is not None and again.items


async def test_requests_before_the_model_is_ready_get_an_empty_list(tmp_path):
    # A model folder that does not load: requests are answered (empty), the user is told why.
    async with lsp_session(tmp_path / "missing", wait_for_model=False) as (client, _):
        open_document(client, URI, SOURCE)
        result = await inline(client, URI, 4, 4)
        assert result is not None and list(result.items) == []
        from tests.lsp_session import wait_until

        await wait_until(lambda: client.messages, what="a message about the model")
        assert "not found" in client.messages[0].message
        assert client.messages[0].type == types.MessageType.Error


async def test_configuration_change_loads_the_model_without_restart(tiny_model_dir, tmp_path):
    from tests.lsp_session import model_loaded, wait_until

    async with lsp_session(tmp_path / "missing", wait_for_model=False) as (client, _):
        await wait_until(lambda: client.messages, what="the load failure")
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"dgemma": {"model": str(tiny_model_dir)}})
        )
        await wait_until(lambda: model_loaded(client), what="the corrected model to load")
        open_document(client, URI, SOURCE)
        result = await inline(client, URI, 4, 4)
        assert result is not None and result.items


async def test_shutdown_and_exit_are_clean(tiny_model_dir):
    async with lsp_session(tiny_model_dir) as (client, _):
        open_document(client, URI, SOURCE)
    # lsp_session sent shutdown, then exit: the process must have ended by itself, with status 0.
    assert client.error is None
    assert client._server.returncode == 0


async def test_typing_through_and_accepting_reuse_work_instead_of_asking_the_model(tiny_model_dir):
    from tests.lsp_session import wait_until

    no_deadline = {"completion": {"latencyBudgetMs": 0}}
    # The tiny model has random weights: after "result = textwrap." it writes several characters (after
    # some other prefixes only one, and typing through one character leaves nothing to reuse).
    typed_line = "    result = textwrap."
    source = SOURCE.replace("\n    \n", f"\n{typed_line}\n")
    col = len(typed_line)
    async with lsp_session(tiny_model_dir, options=no_deadline) as (client, _):
        open_document(client, URI, source)
        first = await inline(client, URI, 4, col)
        shown = first.items[0].insert_text
        assert len(shown) >= 2, f"the tiny model's answer here changed: {shown!r}; pick another line"
        assert client.statuses[-1].lastSource in MODEL_SOURCES  # the model ran (its row or a draft won)
        model_ms = client.statuses[-1].lastLatencyMs
        # The user types the first character of the ghost text: the rest comes back without the model.
        change(client, URI, 2, 4, col, 4, col, shown[0])
        typed = await inline(client, URI, 4, col + 1)
        assert typed.items[0].insert_text == shown[1:]
        assert client.statuses[-1].lastSource == "typed_through"
        # A reused answer's time is not the model's: status bars keep showing the model's latency.
        assert client.statuses[-1].lastLatencyMs == model_ms
        # Backspace: the same context as before, answered from the cache.
        change(client, URI, 3, 4, col, 4, col + 1, "")
        again = await inline(client, URI, 4, col)
        assert again.items[0].insert_text == shown
        assert client.statuses[-1].lastSource == "cache"
        # Accept the whole proposal (the editor inserts it): the next completion was started at once.
        change(client, URI, 4, 4, col, 4, col, shown)
        end_line, end_char = (
            4 + shown.count("\n"),
            (col + len(shown)) if "\n" not in shown else len(shown.rsplit("\n", 1)[1]),
        )
        following = await inline(client, URI, end_line, end_char)
        assert following is not None
        await wait_until(
            lambda: client.statuses[-1].lastSource in ("speculative", "cache"), what="a reused answer"
        )


async def test_stats_request_reports_what_the_server_measured(tiny_model_dir):
    async with lsp_session(tiny_model_dir, options={"completion": {"latencyBudgetMs": 0}}) as (client, _):
        open_document(client, URI, SOURCE)
        await inline(client, URI, 4, 4)  # model
        await inline(client, URI, 4, 4)  # same context: cache
        stats = await client.protocol.send_request_async("dgemma/stats", {"reset": True})
        assert stats.answered == 2
        assert sum(getattr(stats.sources, row, 0) for row in MODEL_SOURCES) == 1 and stats.sources.cache == 1
        assert stats.steps_mean >= 1 and stats.tokens_per_forward > 0
        assert 0 <= stats.prompt_reuse <= 1
        assert stats.overhead.p50_ms >= 0 and stats.peak_rss_mb > 50
        after = await client.protocol.send_request_async("dgemma/stats", None)
        assert after.answered == 0


async def test_several_candidates_come_back_distinct_and_at_the_cursor(tiny_model_dir):
    # One batched pass with different noise seeds; duplicates are dropped, the rest ranked.
    typed_line = "    result = "
    source = SOURCE.replace("\n    \n", f"\n{typed_line}\n")
    col = len(typed_line)
    options = {"completion": {"latencyBudgetMs": 0, "candidates": 3}}
    async with lsp_session(tiny_model_dir, options=options) as (client, _):
        open_document(client, URI, source)
        result = await inline(client, URI, 4, col)
        texts = [item.insert_text for item in result.items]
        assert 2 <= len(texts) <= 3, f"random weights write different text per seed: {texts!r}"
        assert len(set(texts)) == len(texts)
        cursor = types.Position(line=4, character=col)
        assert all(item.range == types.Range(start=cursor, end=cursor) for item in result.items)
