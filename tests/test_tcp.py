"""`dgemma-lsp --tcp --port N`: the real server process, clients on TCP sockets."""

from __future__ import annotations

from tests.adversarial.tcp_client import TcpClient, tcp_server

TEXT = "def add(a, b):\n    total = a + b\n    out = \n    return out\n"


def test_tcp_server_serves_a_session_per_connection_and_exits_cleanly(tmp_path, tiny_model_dir):
    with tcp_server(tmp_path, "--model", str(tiny_model_dir)) as served:
        for _ in range(2):  # the second connection gets a session of its own, after the first's exit
            client = TcpClient(served)
            assert "inlineCompletionProvider" in client.initialize()["capabilities"]
            client.wait_log("loaded in")
            client.open("file:///tcp/example.py", TEXT)
            assert client.completion_text("file:///tcp/example.py", 2, 10).strip()  # the tiny model writes
            client.close()  # shutdown and exit: the server closes this connection
        served.wait_log("session ended", count=2)
        assert served.stop() == 0
