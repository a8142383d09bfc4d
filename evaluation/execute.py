"""Run a completed program in a subprocess and say whether it passes its benchmark's tests.

Not a sandbox (neither is the official HumanEval harness); it keeps honest mistakes contained:
- a fresh temporary folder as the working directory, removed afterwards;
- `python -I` (isolated: no user site-packages, PYTHON* variables ignored) and a minimal environment;
- a wall-clock limit, after which the whole process group is killed; limits on memory, file size
  and core dumps; output goes to files in the temporary folder, so a print loop cannot fill memory;
- no network, twice: in a new network namespace (`unshare --net`, where only a downed loopback
  exists) when the system allows one, and always a guard that runs before the program and makes
  Python's socket connect/sendto/getaddrinfo/create_connection raise PermissionError.

Never in-process: nothing the program does can reach the evaluator.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evaluation.benchmarks import Check, Item

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
_MEMORY_BYTES = 2 << 30
_FILE_BYTES = 16 << 20
_GUARD = "_dgemma_guard.py"
# Runs first in the child; limits are set here rather than in a preexec_fn, which is unsafe in the
# evaluator (torch's threads) and can deadlock the fork.
_GUARD_SOURCE = f"""\
import os, resource, runpy, socket, sys

for _limit, _value in ((resource.RLIMIT_AS, {_MEMORY_BYTES}), (resource.RLIMIT_FSIZE, {_FILE_BYTES})):
    resource.setrlimit(_limit, (_value, _value))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _no_network(*args, **kwargs):
    raise PermissionError("network access is disabled while evaluating completions")


for _name in ("connect", "connect_ex", "sendto", "sendmsg"):
    setattr(socket.socket, _name, _no_network)
socket.create_connection = socket.getaddrinfo = _no_network
sys.path.insert(0, os.getcwd())  # -I leaves the working folder off sys.path; tests import from it
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@dataclass(frozen=True)
class ProcessRun:
    returncode: int | None  # None: killed at the time limit
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


@dataclass(frozen=True)
class Execution:
    passed: bool
    status: Literal["passed", "failed", "timeout"]
    detail: str = ""  # the end of stderr, or what was wrong with the output


@functools.cache
def network_isolation() -> tuple[str, ...]:
    """The command prefix that runs a program without a network, or () where none works here."""
    if shutil.which("unshare") is None:
        return ()
    for prefix in (("unshare", "--net", "--map-root-user"), ("unshare", "--net")):
        try:
            probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return prefix
    logger.warning("unshare --net is not permitted here; network is blocked by the socket guard only")
    return ()


def network_block() -> str:
    """How network access is blocked on this machine, in words (for reports)."""
    return "unshare --net + socket guard" if network_isolation() else "socket guard"


def run_program(
    files: dict[str, str], main: str, stdin: str = "", timeout: float = DEFAULT_TIMEOUT_S
) -> ProcessRun:
    """Write `files` into a fresh folder and run `main` there with the guard and the limits."""
    with tempfile.TemporaryDirectory(prefix="dgemma-exec-") as tmp:
        folder = Path(tmp)
        for name, text in {**files, _GUARD: _GUARD_SOURCE, ".stdin": stdin}.items():
            (folder / name).write_text(text, encoding="utf-8")
        command = [*network_isolation(), sys.executable, "-I", _GUARD, main]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "LANG": "C.UTF-8"}
        with (
            open(folder / ".stdin", "rb") as stdin_file,
            open(folder / ".stdout", "wb") as stdout_file,
            open(folder / ".stderr", "wb") as stderr_file,
        ):
            process = subprocess.Popen(
                command, cwd=folder, env=env, stdin=stdin_file, stdout=stdout_file, stderr=stderr_file,
                start_new_session=True,
            )  # fmt: skip
            try:
                returncode: int | None = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                returncode = None
            finally:
                _kill_group(process)
        read = functools.partial(Path.read_text, encoding="utf-8", errors="replace")
        return ProcessRun(returncode, read(folder / ".stdout"), read(folder / ".stderr"))


def _kill_group(process: subprocess.Popen) -> None:
    # The program may have started children of its own; they share its new session's group.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _tail(text: str, chars: int = 400) -> str:
    return text[-chars:].strip()


def _verdict(run: ProcessRun) -> Execution:
    if run.timed_out:
        return Execution(False, "timeout", _tail(run.stderr))
    if run.returncode != 0:
        return Execution(False, "failed", _tail(run.stderr))
    return Execution(True, "passed")


def check_completion(item: Item, completion: str, timeout: float = DEFAULT_TIMEOUT_S) -> Execution:
    """Run prefix + completion + suffix against the item's tests (the item must have a check)."""
    if item.check is None:
        raise ValueError(f"{item.id} has no executable check")
    return check_program(item.check, item.prefix + completion + item.suffix, timeout)


def check_program(check: Check, program: str, timeout: float = DEFAULT_TIMEOUT_S) -> Execution:
    """Run a whole program against a benchmark's tests."""
    if check.kind == "humaneval":
        source = f"{program}\n{check.test}\ncheck({check.entry_point})\n"
        return _verdict(run_program({"main.py": source}, "main.py", timeout=timeout))
    if check.kind == "module":
        files = {"generated.py": program, "test.py": check.test}
        return _verdict(run_program(files, "test.py", timeout=timeout))
    for number, case in enumerate(check.cases, 1):
        run = run_program({"main.py": program}, "main.py", stdin=case.stdin, timeout=timeout)
        verdict = _verdict(run)
        if not verdict.passed:
            return verdict
        # Judged like SAFIM's harness: the tokens of the output, whitespace ignored.
        if not any(run.stdout.split() == expected.split() for expected in case.outputs):
            return Execution(False, "failed", f"case {number}: wrong output {_tail(run.stdout, 120)!r}")
    return Execution(True, "passed")
