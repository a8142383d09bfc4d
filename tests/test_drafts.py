"""Drafts: guesses from the code around the cursor, seeded into canvas rows the model revises."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.documents.workspace import standalone
from dgemma_lsp.inline.context import build_context
from dgemma_lsp.inline.drafts import Draft, make_drafts, structure_draft
from dgemma_lsp.inline.lookup import (
    Haystack,
    agreed_head,
    continuations,
    cut_before_suffix,
    found_continuations,
    longest_key,
)
from dgemma_lsp.inline.pipeline import agreed_chars
from dgemma_lsp.runtime.stats import MODEL_SOURCES
from engine import InfillRequest
from engine.local_engine import open_brackets
from tests.lsp_session import inline, lsp_session, open_document

REGISTRY = LanguageRegistry()

TESTS = (
    "def test_add():\n    assert add(1, 2) == 3\n\n"
    "def test_sub():\n    assert sub(3, 2) == 1\n\n"
    "def test_mul():\n    assert "
)


def context_at(text: str, cursor: int):
    opened = standalone(text, "python", REGISTRY)
    snapshot = opened.snapshot()
    count = lambda s: len(s.split()) + 1  # noqa: E731
    return build_context(
        snapshot.document.lines, cursor, count_tokens=count, spec=snapshot.spec, tree=snapshot.tree
    ), snapshot


# ---- lookup ------------------------------------------------------------------------------------


def test_the_longest_earlier_match_and_what_followed_it():
    text = "x = compute(a, b)\ny = compute(c, d)\nz = comp"
    cursor = len(text)
    hay = [Haystack(text, cursor - 1, cursor)]
    assert longest_key(text[-256:], hay) == " = comp"  # "\nz = comp" and longer occur nowhere else
    named = "value = compute(a)\nother = compute(b)\nvalue = comp"
    assert longest_key(named, [Haystack(named, len(named) - 1, len(named))]) == "value = comp"
    # Nearest occurrence first; each continuation to the end of its line.
    assert continuations(text, hay, lines=1, limit=3) == ["ute(c, d)", "ute(a, b)"]
    # The cursor's own text is never its own match.
    assert continuations("only here: unique_name", [Haystack("only here: unique_name", 21, 22)], 1, 3) == []


def test_the_keys_other_occurrences_say_how_far_they_agree_with_the_nearest():
    text = "a = fun(1)\nb = fun(1)\nc = fun(2, 3)\nd = fun("
    cursor = len(text)
    lookup = found_continuations(text[-256:], [Haystack(text, cursor - 1, cursor)], 1, 1)
    assert lookup.key == " = fun(" and [t for t, _ in lookup.found] == ["2, 3)"]  # the nearest
    assert lookup.occurrences == 3 and lookup.same_line == 1 and lookup.same_word == 1
    draft = make_drafts(build_context(text, cursor, count_tokens=len, language_id="python"), text, None)[0]
    assert draft.occurrences == 3 and draft.same_line == pytest.approx(1 / 3)


def test_the_head_every_occurrence_goes_on_with_is_the_lookups_agreed_part():
    text = "a = fun(1, x)\nb = fun(1, y)\nd = fun("
    cursor = len(text)
    lookup = found_continuations(text, [Haystack(text, cursor - 1, cursor)], 1, 1)
    assert [t for t, _ in lookup.found] == ["1, y)"] and lookup.agreed == 2  # "1" and "," agree, " y" not
    assert agreed_head("1, y)", lookup.agreed) == "1,"
    draft = make_drafts(build_context(text, cursor, count_tokens=len, language_id="python"), text, None)[0]
    assert draft.agreed == 2
    assert agreed_chars("1, y)", draft) == 2 and agreed_chars("2, z)", draft) == 0  # the model rewrote it
    assert agreed_chars("1,", draft) == 0  # nothing past the agreed head to cut
    alone = "a = fun(1, x)\nd = fun("
    assert found_continuations(alone, [Haystack(alone, len(alone) - 1, len(alone))], 1, 1).agreed == -1


def test_matches_after_the_cursor_and_in_other_documents_count_too():
    text = "first = \nsecond = value_after(1)\n"
    other = "first = from_the_other_file()\n"
    cursor = len("first = ")
    found = continuations(text[:cursor], [Haystack(text, cursor - 1, cursor), Haystack(other)], 1, 3)
    assert found == ["from_the_other_file()"]


def test_a_draft_stops_before_what_follows_the_cursor():
    assert cut_before_suffix("total + x)", ")", "") == "total + x"
    assert cut_before_suffix("a = 1\nb = 2\nreturn a\nc = 3", "", "return a") == "a = 1\nb = 2"


# ---- the drafts stage ------------------------------------------------------------------------


def test_a_repeated_pattern_gives_a_lookup_draft_cut_to_one_line():
    context, snapshot = context_at(TESTS, len(TESTS))
    drafts = make_drafts(context, TESTS, snapshot.tree)
    assert drafts[0].kind == "lookup" and drafts[0].text in ("sub(3, 2) == 1", "add(1, 2) == 3")
    assert all("\n" not in d.text for d in drafts)  # a single-line request gets single-line drafts


def test_the_context_holds_the_line_above_the_cursors():
    assert context_at("a = 1\nb = 2\nc", 13)[0].line_above == "b = 2"
    assert context_at("a = 1\n", 6)[0].line_above == "a = 1"
    assert context_at("a = 1", 3)[0].line_above == ""


def test_a_lookup_that_writes_the_line_above_again_leaves_its_place():
    # `go()` then `b = 2` matched the top of the file, where `b = 2` came twice: the draft would repeat it.
    text = "go()\nb = 2\nb = 2\nstop()\ngo()\nb = 2\n\nend()\n"
    context, snapshot = context_at(text, text.index("\n\nend()") + 1)
    assert make_drafts(context, text, snapshot.tree) == ()  # nor the sibling template: the line above
    other = text.replace("b = 2\nb = 2\nstop", "b = 2\nc = 3\nstop")
    context, snapshot = context_at(other, other.index("\n\nend()") + 1)
    assert make_drafts(context, other, snapshot.tree)[0] == Draft("c = 3", "lookup")


def test_a_lookup_draft_takes_the_cursors_indentation():
    # `try:` matched deeper in the file: what followed it there sits two levels deeper than the body
    # of the `try:` at the cursor.
    text = (
        "def f(d, k):\n    if k:\n        try:\n            del d[k]\n        except KeyError:\n"
        "            pass\n\n\ndef g(d, k):\n    try:"
    )
    context, snapshot = context_at(text, len(text))
    (draft,) = make_drafts(context, text, snapshot.tree)
    assert draft.kind == "lookup" and draft.text.startswith("\n        del d[k]\n    except KeyError:")
    # Indentation typed before the cursor: the draft's code starts at the cursor, its lines follow.
    text = "def f(d):\n    for k in d:\n        print(k)\n        del d[k]\n\n\n"
    text += "def g(d):\n    for k in d:\n    "
    context, snapshot = context_at(text, len(text))
    drafts = make_drafts(context, text, snapshot.tree)
    assert drafts[0].kind == "lookup" and drafts[0].text.startswith("print(k)\n    del d[k]")


def test_the_indent_unit_is_read_after_block_openers():
    # Hanging indents and docstrings indent by 2 and 3 here; blocks by 4.
    text = (
        'def f(a,\n  b):\n    """Doc.\n\n       more\n    """\n    if a:\n        return b\n'
        "    return a\n\n\nclass C:"
    )
    context, _ = context_at(text, len(text))
    assert (context.indent_unit, context.mode, context.stop.min_indent) == ("    ", "block", 4)


def test_the_previous_sibling_is_a_template_on_an_empty_line():
    text = "def f(paths):\n    for path in paths:\n        check(path)\n        \n    return paths\n"
    cursor = text.index("        \n") + len("        ")
    context, snapshot = context_at(text, cursor)
    assert structure_draft(context, text, snapshot.tree) == "check(path)"
    typed = text[:cursor] + "ch" + text[cursor:]
    context, snapshot = context_at(typed, cursor + 2)
    assert structure_draft(context, typed, snapshot.tree) == "eck(path)"  # what was typed starts it
    # The same text found by the lookup and the structure is one draft, not two rows.
    repeated = "items.append(load('a.txt'))\nitems.append(load('b.txt'))\nitems\n\nprint(items)\n"
    context, snapshot = context_at(repeated, repeated.index("items\n\nprint") + len("items"))
    assert structure_draft(context, repeated, snapshot.tree) == ".append(load('b.txt'))"
    assert make_drafts(context, repeated, snapshot.tree) == (Draft(".append(load('b.txt'))", "lookup"),)


def test_no_template_cuts_a_block_in_two():
    # A line cut out of a function's body leaves the cursor at column 0 with the body going on below:
    # the statement above at column 0 is the function itself, and its signature there would split it.
    text = "import os\n\n\ndef f(a, b):\n    if a:\n        return b\n\n    return a\n"
    cursor = text.index("\n\n    return a") + 1
    context, snapshot = context_at(text, cursor)
    assert structure_draft(context, text, snapshot.tree) == ""
    # The same after a body's last line with nothing of the body below, right after it or past blank
    # lines: the signature again was SantaCoder-FIM's structure row (`def f(...)` where the truth was
    # the body's last `return`), and a copy of the previous function is no template for the next one.
    text = "def f(a, b):\n    total = a + b\n\n\n\ndef g():\n    pass\n"
    for blank_lines in (0, 1, 2):
        context, snapshot = context_at(text, text.index("\n\n\n\ndef g") + 1 + blank_lines)
        assert structure_draft(context, text, snapshot.tree) == ""
    # A line dedented right after a loop's body ends the loop: the loop's header is no template for it.
    text = "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    \n"
    context, snapshot = context_at(text, len(text) - 1)
    assert structure_draft(context, text, snapshot.tree) == ""
    # After a statement written over several lines (no block in it) that statement is the template.
    text = "items.append(load('a.txt',\n                  mode='r'))\n\n"
    context, snapshot = context_at(text, len(text) - 1)
    assert (
        structure_draft(context, text, snapshot.tree)
        == "items.append(load('a.txt',\n                  mode='r'))"
    )


def test_drafts_come_only_from_the_documents_given():
    text = "value = \n"
    context, snapshot = context_at(text, len("value = "))
    assert make_drafts(context, text, snapshot.tree) == ()
    neighbour = "value = read_config('app.toml')\n"
    [draft] = make_drafts(context, text, snapshot.tree, (neighbour,))
    assert (draft.text, draft.kind) == ("read_config('app.toml')", "lookup")


# ---- the engine's draft rows -----------------------------------------------------------------


def test_draft_rows_are_seeded_sticky_and_take_the_places_before_fresh_rows(tiny_engine, canvas_specs):
    seen = canvas_specs
    drafts = ("total + 1", "count(items)")
    request = InfillRequest(
        prefix="x = ", suffix=")\n", language="python", max_new_tokens=16, drafts=drafts,
        draft_noise=0.0, anchor=")", max_steps=2, n_candidates=3,
    )  # fmt: skip
    result = tiny_engine.infill(request)
    spec = seen[0]
    assert spec.init.shape[0] == 3  # two draft rows and one fresh-noise row for the third place, one batch
    eos = min(tiny_engine.format.eos_ids)
    for row, draft in enumerate(drafts):
        tokens = tiny_engine.format.encode(draft) + [eos]
        assert spec.init[row, : len(tokens)].tolist() == tokens  # draft_noise 0: the draft as it is
        assert bool(spec.sticky[row, : len(tokens)].all()) and not bool(spec.sticky[row, len(tokens) :].any())
        assert spec.guess[row, : len(tokens)].tolist() == tokens
    assert not bool(spec.sticky[2].any())  # the fresh row is noise, and noise is not sticky
    anchor = tiny_engine.format.encode(")")
    assert bool(spec.fixed[:, -len(anchor) :].all())  # the anchor is fixed in every row, drafts too
    assert {c.draft for c in result.candidates} <= {0, 1, None}
    first = len(seen)
    renoised = tiny_engine.infill(InfillRequest(prefix="x = ", drafts=drafts, draft_noise=1.0, max_steps=1))
    assert renoised.candidates and not bool(seen[first].sticky.any())  # all renoised: nothing sticky
    assert seen[first].init.shape[0] == 2  # one candidate asked for: the two drafts, no noise row


def test_a_draft_longer_than_the_canvas_ends_on_its_last_whole_line(tiny_engine, canvas_specs):
    # Cut mid-line, the row went on in a canvas of noise, and the model alone wrote the rest of it.
    lines = [f"    x = {i}" for i in range(1, 30)]
    draft = "\n".join(lines)
    room = tiny_engine.canvas_length
    request = InfillRequest(
        prefix="def f():\n", max_new_tokens=96, drafts=(draft,), draft_noise=0.0, max_steps=1
    )
    tiny_engine.infill(request)
    row = canvas_specs[0].guess[0, :room].tolist()
    eos = min(tiny_engine.format.eos_ids)
    assert len(tiny_engine.format.encode(draft)) > room and eos in row
    kept = tiny_engine.format.decode(row[: row.index(eos)])
    assert kept.rstrip(" ").endswith("\n") and draft.startswith(kept) and kept.count("\n") >= 1
    # Not inside a call: the last line break where the draft's own brackets are closed.
    call = "a = 1\nf(\nx,\ny,\nz)\n" * 4  # its 16 tokens hold breaks after "1", "(", "x," and "y,"
    first = len(canvas_specs)
    tiny_engine.infill(replace(request, drafts=(call,)))
    row = canvas_specs[first].guess[0, :room].tolist()
    kept = tiny_engine.format.decode(row[: row.index(eos)])
    assert kept == "a = 1\n"
    # A first line longer than the canvas is cut without an EOS: the next canvas goes on with it.
    long_line = "total = " + " + ".join(f"weight_{i} * value_{i}" for i in range(40))
    first = len(canvas_specs)
    tiny_engine.infill(replace(request, drafts=(long_line,)))
    assert eos not in canvas_specs[first].guess[0, :room].tolist()


def test_open_brackets_counts_code_not_strings():
    assert open_brackets("f(a, [1, 2") == 2 and open_brackets("x = ')' + g()\n") == 0
    assert open_brackets("a)\n") == -1


def test_a_seed_canvas_and_drafts_exclude_each_other():
    try:
        InfillRequest(prefix="x", seed_canvas="y", drafts=("z",))
    except ValueError as err:
        assert "exclude" in str(err)
    else:
        raise AssertionError("accepted a seed canvas with drafts")


# ---- through the real server -------------------------------------------------------------------


async def test_the_server_runs_draft_rows_only_from_open_documents(tiny_model_dir, tmp_path):
    on_disk = tmp_path / "never_opened.py"
    on_disk.write_text("configure_logging = setup_handlers(level='debug', colour=True)\n")
    options = {"threads": 1, "completion": {"latencyBudgetMs": 0, "maxSteps": 2}}
    async with lsp_session(tiny_model_dir, options=options) as (client, _):
        uri = (tmp_path / "main.py").as_uri()
        text = "configure_logging = \n"
        open_document(client, uri, text)
        await inline(client, uri, 0, len("configure_logging = "))
        stats = await client.protocol.send_request_async("dgemma/stats", {"reset": True})
        assert stats.drafts.requests_with_drafts == 0  # the pattern is only in a file nobody opened
        open_document(client, on_disk.as_uri(), on_disk.read_text())  # now the client opens it
        open_document(client, (tmp_path / "tests.py").as_uri(), TESTS)
        again = (tmp_path / "again.py").as_uri()  # the same context in main.py would be answered from memory
        open_document(client, again, text)
        await inline(client, again, 0, len("configure_logging = "))
        await inline(client, (tmp_path / "tests.py").as_uri(), 7, len("    assert "))
        stats = await client.protocol.send_request_async("dgemma/stats", {})
        assert stats.drafts.requests_with_drafts == 2 and stats.drafts.draft_rows >= 2
        assert sum(getattr(stats.sources, k, 0) for k in MODEL_SOURCES) == 2
        assert client.statuses[-1].lastSource in MODEL_SOURCES


async def test_the_budget_holds_with_drafts_and_a_closed_gate_offers_nothing(tiny_model_dir, tmp_path):
    uri = (tmp_path / "tests.py").as_uri()
    # A 1 ms budget: the sampler must stop after its first step, draft rows or not.
    tight = {"threads": 1, "completion": {"latencyBudgetMs": 1, "maxSteps": 64}}
    async with lsp_session(tiny_model_dir, options=tight) as (client, _):
        open_document(client, uri, TESTS)
        await inline(client, uri, 7, len("    assert "))
        stats = await client.protocol.send_request_async("dgemma/stats", {})
        assert stats.drafts.draft_rows >= 1
        assert stats.stop_reasons.deadline == 1 and len(stats.stop_reasons) == 1 and stats.steps_mean == 1
    closed = {
        "threads": 1,
        "completion": {"latencyBudgetMs": 0, "maxSteps": 2, "minMeanConfidencePercent": 100},
    }
    async with lsp_session(tiny_model_dir, options=closed) as (client, _):
        open_document(client, uri, TESTS)
        result = await inline(client, uri, 7, len("    assert "))
        assert not result.items


def test_sampler_is_still_deterministic_with_drafts(tiny_engine):
    request = InfillRequest(prefix="x = ", drafts=("total + 1",), max_steps=3)
    first, second = tiny_engine.infill(request), tiny_engine.infill(request)
    assert [c.token_ids for c in first.candidates] == [c.token_ids for c in second.candidates]
    assert torch.get_num_threads() >= 1
