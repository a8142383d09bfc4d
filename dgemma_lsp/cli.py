"""`dgemma-lsp`: serve LSP (stdio or TCP), complete at a position from the terminal, or check the setup.

dgemma-lsp [--stdio]                     serve over stdin/stdout (what editors start)
dgemma-lsp --tcp --port 2087             serve over TCP
dgemma-lsp complete FILE --line L --col C [--model SPEC] [--json]
dgemma-lsp doctor [--model SPEC]
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from engine.remote_settings import API_KEY_VARIABLE, FAMILIES

if TYPE_CHECKING:
    from dgemma_lsp.lsp.server import DgemmaServer
    from engine.api import AllocationWindow

SUBCOMMANDS = ("complete", "doctor", "bench", "eval")


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dgemma-lsp", description="DiffusionGemma completion language server"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (the default)")
    mode.add_argument("--tcp", action="store_true", help="serve over TCP")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=2087)
    parser.add_argument(
        "--max-sessions",
        type=_positive,
        default=4,
        help="over TCP: clients served at once, each a session with its own model (default 4)",
    )
    parser.add_argument("--model", help="model spec: default, a checkpoint folder, a cached HF id, or a URL")
    parser.add_argument("--log-file", help="write the server log here (stderr otherwise)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.epilog = f"subcommands: {', '.join(SUBCOMMANDS)} (dgemma-lsp SUBCOMMAND --help)"
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def _complete_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dgemma-lsp complete", description="print the completion at a position"
    )
    parser.add_argument("file", type=Path, help="the source file (read, never changed)")
    parser.add_argument("--line", type=int, required=True, help="1-based line, within the file")
    parser.add_argument(
        "--col", type=int, required=True, help="1-based column, in characters (at most the line's length + 1)"
    )
    parser.add_argument(
        "--model",
        default="default",
        help="default (the bundled model), a checkpoint folder, a Hugging Face id in the local cache, or "
        "an http(s):// URL of an OpenAI-compatible server (default: default)",
    )
    parser.add_argument(
        "--device",
        default="auto",
        help="auto (cuda when torch sees a GPU, else cpu), cpu, cuda, cuda:N or mps (default: auto)",
    )
    parser.add_argument("--language", help="language id (default: from the file extension)")
    parser.add_argument(
        "--budget-ms",
        type=int,
        default=None,
        help="latency budget (default: the server's for the device; 0: none)",
    )
    parser.add_argument(
        "--candidates",
        type=int,
        default=1,
        help="how many completions to compute; the best is printed, all under `candidates` with --json "
        "(default: 1)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: text, candidates, mode, steps, timings, model, device",
    )
    _add_family(parser)
    return parser


def _add_family(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--family",
        choices=FAMILIES,
        default="auto",
        help=f"for a URL: the prompt the served checkpoint expects (API key: ${API_KEY_VARIABLE})",
    )


def _doctor_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dgemma-lsp doctor", description="report versions, device, model")
    parser.add_argument("--model", default="default", help="a spec; for a URL, what the server serves")
    _add_family(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        command, rest = argv[0], argv[1:]
        if command == "complete":
            return complete(_complete_parser().parse_args(rest))
        if command == "doctor":
            return doctor(_doctor_parser().parse_args(rest))
        return _checkout_tool(command, rest)
    return serve(_serve_parser().parse_args(argv))


def _checkout_tool(command: str, argv: list[str]) -> int:
    """`eval` and `bench` hand over to evaluation/, which lives in a checkout beside dgemma_lsp/ and is
    not in the runtime wheel: an editable install (`pip install -e .`) or a run from the checkout finds it."""
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "evaluation" / "__init__.py").is_file() and str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    try:
        from evaluation.bench.cli import main as bench_main
        from evaluation.cli import main as eval_main
    except ImportError as err:
        print(
            f"dgemma-lsp {command}: needs a checkout of the repository (git clone, then pip install -e .): "
            f"the evaluation tools are not in the installed package ({err})",
            file=sys.stderr,
        )
        return 2
    return eval_main(argv) if command == "eval" else bench_main(argv)


def _configure_logging(verbose: bool, log_file: str | None, sessions: bool = False) -> None:
    """stderr gets warnings and errors (editors file it as errors), --log-file info lines too (with
    debugLog on, the messages pygls sends), -v debug lines in either; the client gets the server's
    details as window/logMessage (dgemma_lsp/lsp/client_log.py). `sessions` (TCP): each line says
    which session's process wrote it."""
    handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    level = logging.DEBUG if verbose else logging.INFO if log_file else logging.WARNING
    handler.setLevel(level)  # the server's loggers pass info lines down for the client's log
    process = " [%(process)d]" if sessions else ""
    logging.basicConfig(
        level=level, format=f"%(asctime)s{process} %(levelname)s %(name)s: %(message)s", handlers=[handler]
    )
    # pygls logs whole messages (InitializeParams, every message sent) from INFO down: code stays out
    # of logs unless the client turns debugLog on.
    logging.getLogger("pygls").setLevel(logging.WARNING)


# The model worker runs Python between its torch calls and holds the GIL meanwhile; a thread waiting
# for it (the event loop with a keystroke to read) gets it after this long. Python's default stalled
# the loop on most keystrokes while the model worked; this does not slow the model's answers
# (docs/performance.md, "Start and server overhead").
GIL_SWITCH_INTERVAL_S = 0.001


def serve(args: argparse.Namespace) -> int:
    _configure_logging(args.verbose, args.log_file, sessions=args.tcp)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    from dgemma_lsp.runtime.heap import hold_mmap_threshold

    heap = hold_mmap_threshold()  # a long-lived process: its memory must not creep
    window = heap.window if heap else None
    if args.tcp:
        from dgemma_lsp.lsp.tcp import serve_tcp

        session = functools.partial(_serve_connection, args.model, window)
        return serve_tcp(args.host, args.port, args.max_sessions, session)
    from dgemma_lsp.lsp.frames import FrameReader

    _session_server(args.model, window).start_io(FrameReader(sys.stdin.buffer))
    return 0


def _session_server(
    model: str | None, window: AllocationWindow | None, tcp_token: str | None = None
) -> DgemmaServer:
    """A server for one session (`tcp_token`: over TCP, what its client presents to be trusted)."""
    from dgemma_lsp.lsp.server import create_server

    server = create_server(model_override=model, window=window)
    server.tcp_token = tcp_token
    server.model.preload()  # torch and transformers import while the client starts up
    return server


def _serve_connection(
    model: str | None, window: AllocationWindow | None, connection: socket.socket, token: str
) -> int:
    """One TCP connection, in the process of its own session: its frames read as stdin's are."""
    from dgemma_lsp.lsp.frames import FrameReader

    server = _session_server(model, window, token)
    with connection, connection.makefile("rb") as incoming, connection.makefile("wb") as outgoing:
        server.start_io(FrameReader(incoming), outgoing)
    return 0


def complete(args: argparse.Namespace) -> int:
    from dgemma_lsp.documents.languages import LanguageRegistry
    from dgemma_lsp.documents.workspace import standalone
    from dgemma_lsp.inline.pipeline import complete as complete_at
    from dgemma_lsp.runtime.options import CompletionOptions, Options
    from engine import EngineError, RemoteSettings, load_engine

    try:
        text = args.file.read_text()
    except (OSError, UnicodeDecodeError) as err:
        print(f"dgemma-lsp: cannot read {args.file}: {err}", file=sys.stderr)
        return 2
    if args.line < 1 or args.col < 1:
        print("dgemma-lsp: --line and --col are 1-based", file=sys.stderr)
        return 2
    lines = text.split("\n")
    if args.line > len(lines):
        shown = len(text.splitlines())  # as an editor counts them: a final newline ends the last line
        print(
            f"dgemma-lsp: --line {args.line} is past the end of {args.file} ({shown} lines)",
            file=sys.stderr,
        )
        return 2
    width = len(lines[args.line - 1].rstrip("\r"))
    if args.col > width + 1:
        print(
            f"dgemma-lsp: --col {args.col} is past the end of line {args.line} ({width} characters: "
            f"--col 1 to {width + 1})",
            file=sys.stderr,
        )
        return 2
    registry = LanguageRegistry()
    spec = registry.spec(args.language) if args.language else registry.spec_for_path(args.file)
    language_id = args.language or (spec.language_ids[0] if spec else "plaintext")
    opened = standalone(text, language_id, registry, args.file.resolve().as_uri())
    cursor = opened.document.offset_at(args.line - 1, args.col - 1, "utf-32")  # utf-32 columns are characters
    options = Options(  # asked for: shown whatever the show-or-not decision would say unasked
        completion=CompletionOptions(
            latency_budget_ms=args.budget_ms, candidates=args.candidates, eagerness="eager"
        )
    )
    try:
        engine = load_engine(args.model, device=args.device, remote=RemoteSettings(family=args.family))
        passes_before = max((e.number for e in getattr(engine, "exchanges", ())), default=0)
        started = time.monotonic()
        completion = complete_at(opened.snapshot(), cursor, options, engine, started)  # what an editor shows
    except EngineError as err:  # one line, never a traceback: a missing model, a remote server down
        print(f"dgemma-lsp: {err}", file=sys.stderr)
        return 1
    result = completion.result
    latency_ms = (time.monotonic() - started) * 1000
    text_out = completion.proposals[0].text if completion.proposals else ""
    if args.json:
        answer = {
            "text": text_out,
            "candidates": [p.text for p in completion.proposals],
            "mode": completion.context.mode,
            "steps": result.steps,
            "tokens_per_forward": round(result.tokens_per_forward, 3),
            "latency_ms": round(latency_ms, 2),
            "engine_ms": round(result.timings.total_ms, 2),
            "stop_reason": result.stop_reason,
            "prompt_tokens": result.prompt_tokens,
            "model": engine.info.name,
            "device": engine.info.device,
        }
        print(json.dumps(answer | _remote_figures(engine, passes_before, result.timings.total_ms)))
    else:
        print(text_out)
    return 0


def _remote_figures(engine, passes_before: int, engine_ms: float) -> dict:
    """What a remote engine knows of the completion's requests (nothing for a local one): the server's
    steps (vLLM does not say: null), the network time apart from the engine's own, each pass's route."""
    exchanges = [e for e in getattr(engine, "exchanges", ()) if e.number > passes_before]
    if engine.info.device != "remote":
        return {}
    network_ms = sum(e.network_ms for e in exchanges)
    steps = [e.server_steps for e in exchanges]
    return {
        "steps": sum(steps) if steps and None not in steps else None,  # type: ignore[arg-type]
        "tokens_per_forward": None,
        "engine_ms": round(max(0.0, engine_ms - network_ms), 2),  # the engine's own work on this machine
        "network_ms": round(network_ms, 2),  # waited on the network and the server
        "route": "+".join(e.route for e in exchanges) or None,  # seeded (diffusion controls) or plain
        "requests": sum(e.requests for e in exchanges),
        "step_cap": next((e.step_cap for e in exchanges if e.step_cap), None),
    }


def doctor(args: argparse.Namespace) -> int:
    from dgemma_lsp.doctor import report
    from engine import RemoteSettings

    text, usable = report(args.model, RemoteSettings(family=args.family))
    print(text)
    return 0 if usable else 1


if __name__ == "__main__":
    sys.exit(main())
