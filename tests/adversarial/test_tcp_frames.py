"""TCP framing recovers as stdio's does (issue 47, item 6): after a frame with a wrong, non-numeric or
lowercase Content-Length, the next well-formed request on the same connection gets its answer."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.adversarial.tcp_client import TcpClient, tcp_server

pytestmark = pytest.mark.adversarial

STATS = json.dumps({"jsonrpc": "2.0", "id": 9001, "method": "dgemma/stats", "params": {}}).encode()

BAD_FRAMES = {
    "too short": b"Content-Length: 12\r\n\r\n" + STATS,
    # Too long: the body takes the next bytes; trailing blanks keep it valid JSON.
    "too long": b"Content-Length: %d\r\n\r\n" % (len(STATS) + 64) + STATS + b" " * 64,
    "not a number": b"Content-Length: ten\r\n\r\n" + STATS,
    "negative": b"Content-Length: -5\r\n\r\n" + STATS,
    "10^14": b"Content-Length: 100000000000000\r\n\r\n" + STATS,
    "lowercase header": b"content-length: %d\r\n\r\n" % len(STATS) + STATS,
    "no header at all": STATS + b"\r\n",
}


@pytest.fixture
def client(tmp_path, tiny_model_dir) -> Iterator[TcpClient]:
    with tcp_server(tmp_path, "--model", str(tiny_model_dir)) as served:
        connected = TcpClient(served)
        connected.initialize()
        yield connected


@pytest.mark.parametrize("bad", list(BAD_FRAMES.values()), ids=list(BAD_FRAMES))
def test_a_bad_frame_leaves_the_connection_reading(client, bad):
    client.write(bad)
    answer = client.request("dgemma/stats", timeout=30)
    assert "result" in answer, answer
