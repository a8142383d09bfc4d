"""Whole-block rewrites and next edits: targets, smallest diffs, edit history, and the LSP surface."""

from __future__ import annotations

import pytest
from lsprotocol import types

from dgemma_lsp.documents.edit_history import EditHistory, preamble
from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.positions import LineIndex
from dgemma_lsp.documents.syntax import SyntaxTree
from dgemma_lsp.rewrite.targets import Target, smallest_changes, target_at
from tests.lsp_session import lsp_session, open_document

CODE = (
    "import math\n"
    "\n"
    "def area(r):\n"
    "    if r < 0:\n"
    "        raise ValueError(r)\n"
    "    return math.pi * r * r\n"
    "\n"
    "x = area(2)\n"
)


def tree_of(text: str):
    return SyntaxTree(LanguageRegistry().grammar("python"), text.encode()).tree


def test_the_cursor_inside_a_block_targets_the_enclosing_multi_line_statement():
    lines = LineIndex(CODE)
    cursor = CODE.index("ValueError")
    target = target_at(lines, tree_of(CODE), cursor, cursor)
    assert target.text == "    if r < 0:\n        raise ValueError(r)"


def test_a_selection_is_widened_to_whole_lines():
    lines = LineIndex(CODE)
    start, end = CODE.index("math.pi"), CODE.index("x = area") + 3
    target = target_at(lines, tree_of(CODE), start, end)
    assert target.text == "    return math.pi * r * r\n\nx = area(2)"


def test_without_a_grammar_the_paragraph_around_the_cursor():
    lines = LineIndex(CODE)
    target = target_at(lines, None, CODE.index("raise"), CODE.index("raise"))
    assert (
        target.text == "def area(r):\n    if r < 0:\n        raise ValueError(r)\n    return math.pi * r * r"
    )


def test_smallest_changes_touch_only_what_differs():
    target = Target(start=10, end=10 + 22, text="total = price * count\n")
    changes = smallest_changes(target, "total = price * amount\n")
    assert [(c.start, c.end, c.text) for c in changes] == [(10 + 16, 10 + 21, "amount")]
    rebuilt = target.text
    for change in reversed(changes):
        rebuilt = rebuilt[: change.start - 10] + change.text + rebuilt[change.end - 10 :]
    assert rebuilt == "total = price * amount\n"


def test_no_change_gives_no_edits():
    assert smallest_changes(Target(0, 5, "a = 1"), "a = 1") == []


def test_edit_history_merges_typing_and_backspace():
    history = EditHistory()
    history.record(10, "", "s")
    history.record(11, "", "u")
    history.record(12, "", "b")
    history.record(12, "b", "")  # backspace
    history.record(40, "total", "subtotal")
    assert [(e.offset, e.old, e.new) for e in history.recent()] == [
        (10, "", "su"),
        (40, "total", "subtotal"),
    ]
    assert preamble(history.recent(), "python") == "# edit: '' -> 'su'\n# edit: 'total' -> 'subtotal'\n"
    assert preamble(history.recent(), "go").startswith("// edit:")


def apply(text: str, edits: list[types.TextEdit], encoding: str) -> str:
    lines = LineIndex(text)
    spans = [
        (
            lines.offset_at(e.range.start.line, e.range.start.character, encoding),
            lines.offset_at(e.range.end.line, e.range.end.character, encoding),
            e.new_text,
        )
        for e in edits
    ]
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


EMOJI_CODE = "def hi():\n    s = '😀 你好'\n    if s:\n        print(s)\n    return s\n"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
async def test_rewrite_code_action_resolves_to_a_versioned_edit_of_the_block(tiny_model_dir, encoding):
    uri = "file:///project/hi.py"
    async with lsp_session(
        tiny_model_dir, encodings=[encoding], options={"rewrite": {"strengthPercent": 60}}
    ) as (
        client,
        init,
    ):
        provider = init.capabilities.code_action_provider
        assert (
            types.CodeActionKind.RefactorRewrite in provider.code_action_kinds and provider.resolve_provider
        )
        open_document(client, uri, EMOJI_CODE)
        line = EMOJI_CODE.split("\n")[3]
        character = len(
            line[: line.index("print")].encode("utf-8" if encoding == "utf-8" else "utf-16-le")
        ) // (1 if encoding == "utf-8" else 2)
        at = types.Position(line=3, character=character)
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(start=at, end=at),
                context=types.CodeActionContext(
                    diagnostics=[], trigger_kind=types.CodeActionTriggerKind.Invoked
                ),
            )
        )
        assert [a.title for a in actions] == ["Rewrite block with DiffusionGemma"]
        assert actions[0].edit is None  # computed on resolve, not on every cursor move
        resolved = await client.code_action_resolve_async(actions[0])
        change = resolved.edit.document_changes[0]
        assert change.text_document.uri == uri and change.text_document.version == 1
        block_start, block_end = EMOJI_CODE.index("    if s:"), EMOJI_CODE.index("    return")
        after = apply(EMOJI_CODE, change.edits, encoding)
        # Only the block changed: what comes before and after it is intact.
        assert after.startswith(EMOJI_CODE[:block_start])
        assert after.endswith(EMOJI_CODE[block_end - 1 :])
        assert change.edits, "strength 60% on random weights rewrites something"
        # An action with no data (VS Code asks to resolve every action it shows, its own too) comes back
        # as it was, not as an error.
        foreign = types.CodeAction(title=f"{actions[0].title} (preview)", kind=actions[0].kind)
        assert await client.code_action_resolve_async(foreign) == foreign


async def test_next_edit_answers_null_or_a_range_with_new_text(tiny_model_dir):
    uri = "file:///project/next.py"
    async with lsp_session(tiny_model_dir) as (client, _):
        open_document(client, uri, CODE)
        params = {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 4}}
        result = await client.protocol.send_request_async("dgemma/nextEdit", params)
        assert result is not None
        assert set(result._fields) == {"range", "newText", "confidence"}
        assert 0 <= result.confidence <= 1
        start, end = result.range.start, result.range.end
        assert (start.line, start.character) <= (end.line, end.character)
        assert 3 <= start.line <= 5  # within the lines a next edit may change
        with pytest.raises(Exception, match="textDocument"):
            await client.protocol.send_request_async(
                "dgemma/nextEdit", {"position": {"line": 0, "character": 0}}
            )
