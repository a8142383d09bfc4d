"""Run `dgemma-lsp` with an audit hook that records network and file events (PEP 578).

    python tests/reliability/audited_server.py AUDIT_LOG [dgemma-lsp arguments...]

The hook is installed before anything of the server is imported, so every `socket.connect`,
name lookup and `open` the server makes is written to AUDIT_LOG, one JSON object a line. Audit
hooks cannot be removed and see every Python-level call: nothing is mocked.
"""

from __future__ import annotations

import json
import sys
import threading

WATCHED = {
    "socket.connect",  # also raised by connect_ex
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "http.client.connect",
    "urllib.Request",
    "open",
}


def install(log_path: str) -> None:
    # Opened before the hook (its own open is not recorded) and kept open for the process lifetime.
    log = open(log_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
    lock = threading.Lock()
    busy = threading.local()

    def hook(event: str, args: tuple) -> None:
        if event not in WATCHED or getattr(busy, "on", False):
            return
        busy.on = True
        try:
            if event == "open":
                path, mode = args[0], args[1]
                if isinstance(path, int):
                    return  # a file descriptor already open
                detail = {"path": str(path if not isinstance(path, bytes) else path.decode(errors="replace"))}
                detail["mode"] = str(mode)
            else:
                detail = {"args": [repr(a)[:200] for a in args]}
            line = json.dumps({"event": event, **detail})
            with lock:
                log.write(line + "\n")
        finally:
            busy.on = False

    sys.addaudithook(hook)


if __name__ == "__main__":
    install(sys.argv[1])
    from dgemma_lsp.cli import main

    sys.exit(main(sys.argv[2:]))
