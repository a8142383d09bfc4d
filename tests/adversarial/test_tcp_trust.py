"""Trust belongs to the connection that presented the token (issue 47, item 2): a client without it
names no model server and no API key, and the server's key goes only where it was configured.

A trap socket stands in for the attacker's server: it listens, and the test asserts that no
connection reaches it once the server said it refused the URL and went on with its own model.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dgemma_lsp.documents.languages import LanguageRegistry
from dgemma_lsp.repository.service import Repository
from dgemma_lsp.runtime.model_host import ModelChoice
from dgemma_lsp.runtime.options import Options, RemoteOptions
from tests.adversarial.tcp_client import TcpClient, tcp_server

pytestmark = pytest.mark.adversarial

SERVER_KEY = "key-of-the-servers-user"
CLIENT_KEY = "key-a-client-made-up"
REFUSED = "refused"  # the server's line when it refuses a client's model URL or key


class Trap:
    """The attacker's server: a socket that records the head of every HTTP request reaching it."""

    def __init__(self) -> None:
        self.listening = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listening.getsockname()[1]}"
        self.heads: list[bytes] = []
        self._arrived = threading.Condition()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self.listening.accept()
                with connection:
                    connection.settimeout(30)
                    head = b""
                    while b"\r\n\r\n" not in head and (piece := connection.recv(4096)):
                        head += piece
                with self._arrived:
                    self.heads.append(head)
                    self._arrived.notify_all()

    def first_head(self, timeout: float = 60.0) -> bytes:
        with self._arrived:
            assert self._arrived.wait_for(lambda: self.heads, timeout), "no request reached the trap"
            return self.heads[0]


@pytest.fixture
def trap() -> Iterator[Trap]:
    found = Trap()
    yield found
    found.listening.close()


def refusal(client: TcpClient, trap: Trap, since: int = 0) -> str:
    """The server's line that it refused the client's URL or key (what reached the trap otherwise)."""
    try:
        return client.wait_log(REFUSED, since=since)
    except TimeoutError:
        pytest.fail(f"no refusal; requests that reached the client's server: {trap.heads}")


def test_an_untrusted_client_names_no_model_server(tmp_path, tiny_model_dir, trap):
    with tcp_server(tmp_path, env={"DGEMMA_API_KEY": SERVER_KEY}) as served:
        client = TcpClient(served)
        client.initialize(options={"model": str(tiny_model_dir)})  # a local model: its to choose
        client.wait_log("loaded in")
        since = client.mark()
        settings = {"dgemma": {"model": trap.url, "remote": {"apiKey": CLIENT_KEY}}}
        client.notify("workspace/didChangeConfiguration", {"settings": settings})
        assert trap.url not in refusal(client, trap, since)  # said, without echoing it
        uri = "file:///t/example.py"
        client.open(uri, "def add(a, b):\n    total = a + b\n    out = \n    return out\n")
        assert client.completion_text(uri, 2, 10)  # still the tiny model (which always writes here)
        client.close()
    assert trap.heads == []


def test_an_untrusted_client_naming_a_server_at_initialize_keeps_the_model_it_had(tmp_path, trap):
    with tcp_server(tmp_path, env={"DGEMMA_API_KEY": SERVER_KEY}) as served:
        client = TcpClient(served)
        client.initialize(options={"model": trap.url})
        refusal(client, trap)
        client.wait_log("loaded in")  # the bundled model, the server's default
        client.close()
    assert trap.heads == []


def test_a_trusted_client_names_its_server_and_the_key_goes_there(tmp_path, trap):
    """The control: the trap does see a server the token holder names."""
    with tcp_server(tmp_path, env={"DGEMMA_API_KEY": SERVER_KEY}) as served:
        client = TcpClient(served)
        client.initialize(options={"model": trap.url}, token=served.token())
        assert f"Bearer {SERVER_KEY}".encode() in trap.first_head()
        client.drop()


def test_an_untrusted_clients_key_is_not_sent_to_the_configured_server(tmp_path, trap):
    with tcp_server(tmp_path, "--model", trap.url, env={"DGEMMA_API_KEY": SERVER_KEY}) as served:
        client = TcpClient(served)
        client.initialize(options={"remote": {"apiKey": CLIENT_KEY}})
        refusal(client, trap)
        head = trap.first_head()
        assert f"Bearer {SERVER_KEY}".encode() in head and CLIENT_KEY.encode() not in head
        client.drop()


def test_the_servers_key_goes_only_to_a_url_it_was_configured_for(monkeypatch):
    monkeypatch.setenv("DGEMMA_API_KEY", SERVER_KEY)
    options = Options(model="http://elsewhere:1")
    assert ModelChoice.of(options, server_key=False).remote.key() is None
    assert ModelChoice.of(options, server_key=True).remote.key() == SERVER_KEY
    own = Options(model="http://elsewhere:1", remote=RemoteOptions(api_key=CLIENT_KEY))
    assert ModelChoice.of(own, server_key=False).remote.key() == CLIENT_KEY


def test_folders_added_to_an_untrusted_session_are_not_read(tmp_path):
    """Even with an index running (a session that lost its trust), an added folder is not walked."""
    first, added = tmp_path / "first", tmp_path / "added"
    for folder in (first, added):
        folder.mkdir()
        (folder / "code.py").write_text("VALUE = 1\n")
    repository = Repository(LanguageRegistry())
    repository.set_folders([first.as_uri()])
    repository.configure(Options(), lambda progress: None)
    assert repository.indexer is not None and repository.indexer.idle()
    repository.trusted = False
    repository.add_folders([added.as_uri()], [])
    assert repository.indexer.idle()
    assert Path(added) not in repository.indexer.folders and added not in repository.folders
    repository.stop()
