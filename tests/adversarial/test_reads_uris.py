"""Only `file:` URIs with an empty or `localhost` host and an absolute path name files: `file://`,
`file:c.py/..`, a host part and a relative `rootPath` are refused, never resolved against the server's
working directory."""

from __future__ import annotations

import pytest

from tests.lsp_session import wait_until
from tests.repository.attacks import (
    REMOTE,
    Audit,
    add_folder,
    indexed_lines,
    logged,
    session,
    workspace,
    write,
)

pytestmark = pytest.mark.adversarial
OPTIONS = {"context": {"workspace": True}}


def indexed_folder(client, folder) -> bool:
    return any(line.startswith(f"indexed {folder.resolve()}:") for line in indexed_lines(client))


async def test_odd_folder_uris_are_refused(tmp_path):
    cwd, elsewhere, root = tmp_path / "cwd", tmp_path / "elsewhere", workspace(tmp_path)
    write(cwd, "in_working_directory.py")
    write(elsewhere, "on_another_host.py")
    uris = [
        "file://",
        "file:c.py/..",
        f"file://otherhost{elsewhere.resolve()}",
        "file:relative/dir",
        root.as_uri(),
    ]
    audit = Audit(tmp_path / "opened.log")
    async with session(audit.command(), REMOTE, folder_uris=uris, options=OPTIONS, cwd=cwd) as client:
        await wait_until(lambda: indexed_folder(client, root), what="the workspace index")
        assert logged(client, "file://otherhost")  # each refusal says so
    opened = audit.opened()
    assert str(root.resolve() / "app.py") in opened
    assert not any(path.startswith((str(cwd.resolve()), str(elsewhere.resolve()))) for path in opened)


async def test_a_relative_root_path_is_refused(tmp_path):
    cwd, root = tmp_path / "cwd", workspace(tmp_path)
    write(cwd, "relative/dir/in_working_directory.py")
    audit = Audit(tmp_path / "opened.log")
    async with session(audit.command(), REMOTE, options=OPTIONS, root_path="relative/dir", cwd=cwd) as client:
        add_folder(client, root)  # its index is reported after any folder named before it
        await wait_until(lambda: indexed_folder(client, root), what="the workspace index")
    assert not any(path.startswith(str(cwd.resolve())) for path in audit.opened())
