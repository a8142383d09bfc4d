"""Floods of watched-file events: 100 events against a 0.8 MB .gitignore parse it no more (it did not
change), and one notification of 100,000 events leaves completions answered in time; the indexer gets
through both and indexes a folder added after them."""

from __future__ import annotations

import pytest
from lsprotocol import types

from tests.lsp_session import wait_until
from tests.repository.attacks import (
    REMOTE,
    Audit,
    add_folder,
    complete_in_app,
    completion_text,
    indexed_lines,
    local_session,
    session,
    watched,
    workspace,
    write,
)

pytestmark = pytest.mark.adversarial
CHANGED = types.FileChangeType.Changed


async def test_events_do_not_parse_an_unchanged_gitignore_again(tmp_path):
    root, second = workspace(tmp_path), tmp_path / "second"
    big = "scratch/\n" + "".join(f"# {'x' * 70} {n}\n" for n in range(11_000))  # 0.8 MB
    gitignore = write(root, ".gitignore", big)
    files = [write(root, f"pkg/module_{n}.py", f"def function_{n}():\n    return {n}\n") for n in range(100)]
    write(second, "later.py")
    audit = Audit(tmp_path / "opened.log")
    async with session(audit.command(), REMOTE, [root], {"context": {"workspace": True}}) as client:
        await wait_until(lambda: indexed_lines(client), what="the workspace index")
        mark = audit.mark()
        for path in files:  # one notification each, as an editor sends them while a tool writes
            watched(client, [(path.as_uri(), CHANGED)])
        add_folder(client, second)  # walked once the changes before it are applied
        await wait_until(lambda: len(indexed_lines(client)) == 2, what="the folder added after the events")
    assert str(gitignore.resolve()) not in audit.since(mark)


async def test_a_hundred_thousand_events_in_one_notification_leave_completions_answered(
    tmp_path, tiny_model_dir
):
    root, second = workspace(tmp_path), tmp_path / "second"
    write(second, "later.py")
    audit = Audit(tmp_path / "opened.log")
    async with local_session(tiny_model_dir, audit, [root]) as client:
        await wait_until(lambda: indexed_lines(client), what="the workspace index")
        await complete_in_app(client, root)
        events = [
            ((root / "generated" / f"file_{n}.py").as_uri(), types.FileChangeType.Created)
            for n in range(100_000)
        ]
        watched(client, events)
        for _ in range(5):  # each within the bound, while the indexer works through them
            await completion_text(client, (root / "app.py").as_uri())
        add_folder(client, second)
        await wait_until(lambda: len(indexed_lines(client)) == 2, timeout=300, what="the folder added after")
