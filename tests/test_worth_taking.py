"""When the server speaks, through the real server over stdio: the model's languages, the user's
eagerness and trigger, the show-or-not decision a model ships, and what it learns from the user."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from lsprotocol import types

from tests.lsp_session import change, inline, lsp_session, open_document, wait_until

TEXT = "import textwrap\n\ndef shorten(text, width):\n    words = text.split()\n    result = \n"
LINE, COLUMN = 4, len("    result = ")
URI = "file:///project/shorten.py"
NO_BUDGET = {"threads": 1, "completion": {"latencyBudgetMs": 0}}  # the tiny model always answers the same


def prepared_model(
    tiny: Path, folder: Path, languages: list[str] | None = None, bias: float | None = None
) -> Path:
    """The tiny model with what a trained checkpoint ships beside its weights: the languages of its
    training (training.json) and a show-or-not decision (decision.json) whose bias decides alone."""
    shutil.copytree(tiny, folder)
    if languages is not None:
        record = {"config": {"language_weights": dict.fromkeys(languages, 1.0)}}
        (folder / "training.json").write_text(json.dumps(record))
    if bias is not None:
        decision = {"weights": {}, "bias": bias, "thresholds": {"balanced": 0.5, "quiet": 0.9}}
        (folder / "decision.json").write_text(json.dumps(decision))
    return folder


async def automatic(client, uri: str, line: int, character: int) -> types.InlineCompletionList:
    """A request as an editor sends it while the user types (not asked for with a key)."""
    params = types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
    )
    return await asyncio.wait_for(client.text_document_inline_completion_async(params), timeout=30)


async def test_no_suggestion_in_a_language_the_model_was_not_trained_on_unless_the_user_lists_it(
    tiny_model_dir, tmp_path
):
    model = prepared_model(tiny_model_dir, tmp_path / "python-only", languages=["python"])
    notes = "Meeting notes\n\nresult = \n"
    async with lsp_session(model, options=NO_BUDGET) as (client, _):
        open_document(client, "file:///project/notes.txt", notes, language="plaintext")
        open_document(client, URI, TEXT)
        assert not (await inline(client, "file:///project/notes.txt", 2, 9)).items
        assert (await inline(client, URI, LINE, COLUMN)).items, "its own language is completed"
    listed = {**NO_BUDGET, "completion": {**NO_BUDGET["completion"], "languages": ["plaintext", "python"]}}
    async with lsp_session(model, options=listed) as (client, _):
        open_document(client, "file:///project/notes.txt", notes, language="plaintext")
        assert (await inline(client, "file:///project/notes.txt", 2, 9)).items, "turned on: completed"


async def test_manual_trigger_answers_only_when_the_user_asks(tiny_model_dir):
    manual = {**NO_BUDGET, "completion": {**NO_BUDGET["completion"], "trigger": "manual"}}
    async with lsp_session(tiny_model_dir, options=manual) as (client, _):
        open_document(client, URI, TEXT)
        assert not (await automatic(client, URI, LINE, COLUMN)).items
        assert (await inline(client, URI, LINE, COLUMN)).items  # asked for with the editor's key


async def test_a_suggestion_the_decision_hides_is_not_shown_but_eager_and_asking_show_it(
    tiny_model_dir, tmp_path
):
    hiding = prepared_model(tiny_model_dir, tmp_path / "hiding", bias=-30.0)  # nothing is worth showing
    async with lsp_session(hiding, options=NO_BUDGET) as (client, _):
        open_document(client, URI, TEXT)
        assert not (await automatic(client, URI, LINE, COLUMN)).items  # balanced, the default
        assert (await inline(client, URI, LINE, COLUMN)).items  # asked for: shown whatever it scores
    eager = {**NO_BUDGET, "completion": {**NO_BUDGET["completion"], "eagerness": "eager"}}
    async with lsp_session(hiding, options=eager) as (client, _):
        open_document(client, URI, TEXT)
        assert (await automatic(client, URI, LINE, COLUMN)).items
    showing = prepared_model(tiny_model_dir, tmp_path / "showing", bias=30.0)
    async with lsp_session(showing, options=NO_BUDGET) as (client, _):
        open_document(client, URI, TEXT)
        assert (await automatic(client, URI, LINE, COLUMN)).items


async def test_suggestion_facts_go_only_to_a_client_that_declares_them_and_carry_the_users_choices(
    tiny_model_dir, tmp_path
):
    model = prepared_model(tiny_model_dir, tmp_path / "model", bias=30.0)
    async with lsp_session(model, options=NO_BUDGET) as (client, _):
        seen = []
        client.feature("dgemma/suggestion")(lambda params: seen.append(params))
        open_document(client, URI, TEXT)
        await automatic(client, URI, LINE, COLUMN)
        assert not seen  # not declared: nothing new on the wire
    async with lsp_session(model, options=NO_BUDGET, experimental={"suggestion": True}) as (client, _):
        seen = []
        client.feature("dgemma/suggestion")(lambda params: seen.append(params))
        open_document(client, URI, TEXT)
        shown = (await automatic(client, URI, LINE, COLUMN)).items[0].insert_text
        await wait_until(lambda: seen, what="dgemma/suggestion")
        (item,) = seen[-1].items
        # pygls hands custom params over as named tuples.
        assert item.shown and item.probability > 0.99 and item.facts.text == shown
        assert item.facts.history.previous == "none"
        # The user takes it with Tab: the next suggestion's facts say so.
        change(client, URI, 2, LINE, COLUMN, LINE, COLUMN, shown)
        count = len(seen)
        await automatic(client, URI, LINE, COLUMN + len(shown))
        await wait_until(lambda: len(seen) > count, what="the next dgemma/suggestion")
        assert seen[-1].items and all(i.facts.history.previous == "taken" for i in seen[-1].items)
