"""Document sync through the real server: random incremental edits in utf-8 and utf-16, astral
characters included, checked against a reference text after every edit.

The server has no request that returns a document's text, and none is added for tests. Its copy
is checked through behaviour instead, against a fresh document opened with the reference text:
- after every didChange, the rewrite code action at the cursor: its block offsets come from the
  server's text and its incremental tree-sitter tree, and must equal the fresh document's;
- at the end of each sequence, an inline completion in the fresh document, then one in the edited
  document: the engine keeps the last prompt's KV cache, so the second reuses all but its last
  prompt token (`dgemma/stats` counts them) only if its windows equal the fresh document's token for
  token, and the answers must be the same. The windows are set larger than any document drawn here,
  so they hold all of it.
Unit-level property tests of OpenFiles and the tree are in tests/test_documents.py and
tests/test_syntax.py; this covers the server's path (JSON, lsprotocol, positions, handlers).
"""

from __future__ import annotations

import itertools
import re
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dgemma_lsp.runtime.stats import MODEL_SOURCES
from tests.reliability.wire import RawServer

OPTIONS = {
    "device": "cpu",
    # Windows bigger than any drawn document; few steps and no repair keep model runs short.
    "context": {"prefixTokens": 4096, "suffixTokens": 4096},
    "completion": {"latencyBudgetMs": 0, "maxSteps": 2, "syntaxRepair": False},
}
FRAGMENTS = [
    "def f(x):\n", "    return x\n", "if x:\n", "        y = '😀'\n", "class A:\n", "    pass\n", "\n",
    "\r\n", "\r", "\t", " ", "# 𝔘𝔫𝔦 é\n", "(", ")", "[1, 2]", "'''doc\n'''", "x = f(\n", "𐍈", "你好", "a",
]  # fmt: skip
TEXT = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join),
    st.text(alphabet="ab \n\r\t😀𝔘é(){}:'", max_size=30),
)
_BREAK = re.compile(r"\r\n|\r|\n")
_ids = itertools.count()


def units(text: str, encoding: str) -> int:
    return len(text.encode("utf-8")) if encoding == "utf-8" else len(text.encode("utf-16-le")) // 2


def line_starts(text: str) -> list[int]:
    """LSP lines (a reference apart from dgemma_lsp.documents.positions): breaks are \\r\\n, \\r, \\n."""
    return [0, *(m.end() for m in _BREAK.finditer(text))]


def line_end(text: str, starts: list[int], line: int) -> int:
    """Offset of the end of `line`'s content, before its break."""
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    while end > starts[line] and text[end - 1] in "\r\n":
        end -= 1
    return end


def position(text: str, offset: int, encoding: str) -> dict:
    starts = line_starts(text)
    line = bisect_right(starts, offset) - 1
    return {"line": line, "character": units(text[starts[line] : offset], encoding)}


@st.composite
def offset_in(draw, text: str) -> int:
    offset = draw(st.integers(0, len(text)))
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        offset -= 1  # not inside a "\r\n": no LSP position points there
    return offset


@st.composite
def edit(draw, text: str, encoding: str) -> tuple[dict, str]:
    """One content change drawn against `text`: (the change as sent, the text after it)."""
    new = draw(TEXT)
    if draw(st.integers(0, 19)) == 0:
        return {"text": new}, new  # the whole document
    a, b = sorted((draw(offset_in(text)), draw(offset_in(text))))
    start, end = position(text, a, encoding), position(text, b, encoding)
    if draw(st.integers(0, 4)) == 0:
        # Past the end of the line: clamped to its end, so the reference cuts there too.
        starts = line_starts(text)
        b = line_end(text, starts, end["line"])
        end = {"line": end["line"], "character": units(text[starts[end["line"]] : b], encoding) + 7}
        a = min(a, b)
        start = position(text, a, encoding)
    return {"range": {"start": start, "end": end}, "text": new}, text[:a] + new + text[b:]


@pytest.fixture(scope="module", params=["utf-8", "utf-16"])
def encoded_server(
    request: pytest.FixtureRequest, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RawServer, str]]:
    encoding = request.param
    server = RawServer(stderr_path=tmp_path_factory.mktemp("sync-log") / "stderr.log")
    result = server.initialize({"model": str(tiny_model_dir), **OPTIONS}, encodings=[encoding])
    assert result["capabilities"]["positionEncoding"] == encoding
    server.wait_for_model()
    yield server, encoding
    assert server.close() == 0


def code_action(server: RawServer, uri: str, at: dict) -> object:
    answer = server.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}},
    )
    assert "result" in answer, answer
    result = answer["result"]
    # The block's offsets (and nothing that names the document or its version).
    return None if not result else [(a["data"]["start"], a["data"]["end"]) for a in result]


def same_as_fresh_document(server: RawServer, uri: str, reference: str, at: dict) -> None:
    """The rewrite action at `at` in the edited document equals the one in a fresh copy."""
    fresh = f"file:///sync/fresh-{next(_ids)}.py"
    server.open(fresh, reference)
    try:
        assert code_action(server, uri, at) == code_action(server, fresh, at), reference
    finally:
        server.close_document(fresh)


def test_random_incremental_edits_keep_the_server_text_in_step(
    encoded_server: tuple[RawServer, str], figures: dict, long_mode: bool
) -> None:
    server, encoding = encoded_server

    @settings(
        max_examples=300 if long_mode else 25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        uri = f"file:///sync/edited-{next(_ids)}.py"
        reference = data.draw(TEXT, label="initial text")
        server.open(uri, reference)
        cursor = edits = 0
        for version in range(2, 2 + data.draw(st.integers(1, 8), label="didChange count")):
            changes = []
            for _ in range(data.draw(st.integers(1, 3), label="changes in one didChange")):
                change, reference = data.draw(edit(reference, encoding), label="change")
                changes.append(change)
            server.change(uri, version, changes)
            edits += len(changes)
            cursor = data.draw(offset_in(reference), label="cursor")
            same_as_fresh_document(server, uri, reference, position(reference, cursor, encoding))
        # The completion windows: the edited document's prompt is the fresh one's, token for token.
        at = position(reference, cursor, encoding)
        fresh = f"file:///sync/fresh-{next(_ids)}.py"
        server.open(fresh, reference)
        first = server.request("textDocument/inlineCompletion", server.inline_params(fresh, **at), 60)
        server.stats(reset=True)
        second = server.request("textDocument/inlineCompletion", server.inline_params(uri, **at), 60)
        figures_now = server.stats()
        assert sum(figures_now["sources"].get(k, 0) for k in MODEL_SOURCES) == 1
        assert figures_now["reused_prompt_tokens"] == figures_now["prompt_tokens"] - 1, (reference, at)
        assert first["result"] == second["result"]
        server.close_document(fresh)
        server.close_document(uri)
        for name, n in (
            (f"edit sequences checked ({encoding})", 1),
            (f"content changes checked ({encoding})", edits),
        ):
            figures[name] = int(figures.get(name, 0)) + n

    run()
