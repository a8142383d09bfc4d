"""The real server with an audit hook that records every file the process opens, one path per line
(`python tests/repository/audited_server.py LOG -- dgemma-lsp arguments`): tests check from it that
ignored, secret and out-of-root files are never opened. Test material, not part of the server."""

from __future__ import annotations

import contextlib
import os
import sys


def main() -> int:
    log = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 - open for the whole process

    def record(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], str | bytes | os.PathLike):
            with contextlib.suppress(ValueError, OSError):  # at exit the log may be closed already
                log.write(f"{os.fsdecode(args[0])}\n")

    sys.addaudithook(record)
    from dgemma_lsp.cli import main as serve

    return serve(sys.argv[3:] if sys.argv[2:3] == ["--"] else sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
