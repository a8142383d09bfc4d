"""A folder the server may not list (another user's, say a database volume) is skipped with a log line:
the indexer goes on with the rest, reports the folder indexed, and indexes a folder added later. Tests
run as root here, where permissions do not bite: the server runs without root's power to read any file
(the interpreter lives under /root, which the nobody user may not read), and the folder is nobody's."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.lsp_session import wait_until
from tests.repository.attacks import REMOTE, Audit, add_folder, indexed_lines, session, write

pytestmark = pytest.mark.adversarial
AS_ROOT = os.geteuid() == 0


@pytest.mark.skipif(AS_ROOT and shutil.which("setpriv") is None, reason="needs setpriv (util-linux) as root")
async def test_an_unlistable_folder_is_skipped_and_the_index_goes_on(tmp_path):
    root, second = tmp_path / "project", tmp_path / "second"
    for relative in ("a/ok.py", "locked/inner.py", "z/after.py"):
        write(root, relative, "def kept():\n    return 1\n")
    write(second, "later.py", "def later():\n    return 2\n")
    locked = root / "locked"
    if AS_ROOT:
        os.chown(locked, 65534, 65534)  # nobody's
    os.chmod(locked, 0o700 if AS_ROOT else 0o000)
    audit = Audit(tmp_path / "opened.log")
    command = audit.command(without_root_reads=AS_ROOT)
    try:
        async with session(command, REMOTE, [root], {"context": {"workspace": True}}) as client:
            await wait_until(lambda: indexed_lines(client), what="the workspace index")
            assert indexed_lines(client)[0].startswith(f"indexed {root.resolve()}: 2 files")
            add_folder(client, second)
            await wait_until(lambda: len(indexed_lines(client)) == 2, what="the folder added later")
    finally:
        os.chmod(locked, 0o755)
