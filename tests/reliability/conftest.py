"""Reliability and security suite: `--long` runs the 5-minute soak and the bigger fuzz counts by hand.

python -m pytest tests/reliability            # the CI part (about two minutes)
python -m pytest tests/reliability --long     # by hand: 5-minute soak, 10x the fuzzed messages
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.wire import RawServer

FIGURES = pytest.StashKey[dict[str, object]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[FIGURES] = {}


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The figures the issue asks for (messages fuzzed, edit sequences, soak drift, faults)."""
    figures = config.stash.get(FIGURES, {})
    if figures:
        terminalreporter.section("reliability figures")
        for name, value in figures.items():
            terminalreporter.write_line(f"{name}: {value}")


@pytest.fixture(scope="session")
def figures(request: pytest.FixtureRequest) -> dict[str, object]:
    return request.config.stash[FIGURES]


@pytest.fixture(scope="session")
def long_mode(request: pytest.FixtureRequest) -> bool:
    # getoption with a default: the option exists only when this conftest was loaded at startup.
    return bool(request.config.getoption("--long", default=False))


@pytest.fixture(scope="module")
def tiny_server(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory, figures: dict[str, object]
) -> Iterator[RawServer]:
    """One real server over stdio with the tiny model loaded, shared by a module's tests."""
    log = tmp_path_factory.mktemp("server-log") / "stderr.log"
    server = RawServer(stderr_path=log)
    server.initialize({"model": str(tiny_model_dir), "device": "cpu", "rewrite": {"latencyBudgetMs": 500}})
    server.wait_for_model()
    yield server
    crashes = "server processes that exited unexpectedly"
    figures[crashes] = int(figures.get(crashes, 0)) + (not server.alive())
    assert server.alive(), f"the server died; its log is {log}"
    assert server.close() == 0
