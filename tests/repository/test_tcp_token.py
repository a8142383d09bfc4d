"""Over TCP any local user can connect: the server reads a client's workspace folders only when it
presents the token the server wrote where only its user can read it."""

from __future__ import annotations

import stat

import pytest

from tests.adversarial.tcp_client import TcpClient, tcp_server
from tests.repository.test_server_workspace import HELPERS

TEXT = "def add(a, b):\n    total = a + b\n    out = \n    return out\n"


@pytest.mark.parametrize("present", [False, True])
def test_a_tcp_client_reads_the_workspace_only_with_the_token(tmp_path, tiny_model_dir, present):
    root = tmp_path / "project"
    root.mkdir()
    (root / "helpers.py").write_text(HELPERS)
    with tcp_server(tmp_path, "--model", str(tiny_model_dir)) as served:
        token = served.token()
        assert stat.S_IMODE(served.token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(served.token_file.parent.stat().st_mode) == 0o700
        client = TcpClient(served)
        client.initialize(folders=[root], token=token if present else None)
        if present:
            client.wait_log(f"indexed {root}")  # the walk of the folder is over
        else:
            client.wait_log("its workspace folders are not read")
            client.wait_log("loaded in")  # the index would start now: after the load
            client.open("file:///elsewhere/example.py", TEXT)
            assert "result" in client.complete("file:///elsewhere/example.py", 2, 10)
        client.close()
        opened = served.opened()
    assert (str((root / "helpers.py").resolve()) in opened) is present
