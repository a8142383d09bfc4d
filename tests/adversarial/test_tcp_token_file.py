"""The token file (issue 47, item 10): private from its first byte, gone when the server ends.

A token file left by an earlier server (mode 0644, from an older version, say) must not receive the
new token: whoever opened it then reads the token through that descriptor, chmod or not.
"""

from __future__ import annotations

import os
import signal
import stat

import pytest

from tests.adversarial.tcp_client import TcpClient, free_port, tcp_server, wait_for

pytestmark = pytest.mark.adversarial

STALE = b"stale token of an older server"


def test_a_stale_token_file_never_receives_the_new_token(tmp_path):
    port = free_port()
    stale = tmp_path / "runtime" / "dgemma-lsp" / f"tcp-{port}.token"
    stale.parent.mkdir(parents=True, mode=0o755)
    stale.write_bytes(STALE)
    stale.chmod(0o644)
    held = os.open(stale, os.O_RDONLY)  # a reader who opened the old file while it was readable
    try:
        with tcp_server(tmp_path, port=port) as served:
            wait_for(lambda: stale.exists() and stale.read_bytes() != STALE, "the new token")
            token = served.token()
            assert stat.S_IMODE(stale.stat().st_mode) == 0o600
            assert stat.S_IMODE(stale.parent.stat().st_mode) == 0o700
            assert os.pread(held, 4096, 0) == STALE  # the old file kept its bytes: the token is elsewhere
            assert token.encode() not in os.pread(held, 4096, 0)
            assert served.stop() == 0
    finally:
        os.close(held)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_the_token_file_goes_when_the_server_ends(tmp_path, tiny_model_dir, how):
    with tcp_server(tmp_path, "--model", str(tiny_model_dir)) as served:
        client = TcpClient(served)
        client.initialize(token=served.token())
        assert served.token_file.exists()
        code = served.stop(how)
        assert not served.token_file.exists()
        assert code == 0
        client.wait_closed()  # its session ends with the server
