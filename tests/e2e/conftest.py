"""Fixtures for the editor end-to-end tests: tools found or skipped with the reason, the tiny model,
the server's optional features, a scratch workspace with the fixture files."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e import tools
from tests.e2e.server_probe import ServerFeatures, probe
from tests.test_worth_taking import prepared_model

FIXTURES = tools.ROOT / "fixtures" / "editors"


def need(find, *args):
    """The tool, or a skip that says what is missing and how to install it."""
    try:
        return find(*args)
    except tools.Missing as missing:
        pytest.skip(str(missing))


def poll(what: str, check: Callable, timeout: float, context: Callable[[], str], every: float = 0.05):
    """The first true value of `check()`, asked every `every` s; after `timeout` s the test fails,
    naming `what` and showing `context()` (the screen, a log)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; {context()}")
        time.sleep(every)


@pytest.fixture(scope="session")
def server_command() -> Path:
    return need(tools.find_server)


@pytest.fixture(scope="session")
def server_features(server_command: Path, tiny_model_dir: Path) -> ServerFeatures:
    return probe(server_command, tiny_model_dir)


@pytest.fixture(scope="session")
def showing_model(tiny_model_dir: Path, tmp_path_factory) -> Path:
    """The tiny model with a show-or-not decision that keeps every suggestion (bias +30)."""
    return prepared_model(tiny_model_dir, tmp_path_factory.mktemp("decided") / "showing", bias=30.0)


@pytest.fixture(scope="session")
def hiding_model(tiny_model_dir: Path, tmp_path_factory) -> Path:
    """The tiny model with a show-or-not decision that hides every suggestion it is not asked for
    (bias -30): only the editor's suggest key, or eagerness "eager", shows one."""
    return prepared_model(tiny_model_dir, tmp_path_factory.mktemp("decided") / "hiding", bias=-30.0)


@pytest.fixture(scope="session")
def slow_model_dir(tmp_path_factory) -> Path:
    """The slow random-weight model of the released architecture (tests/slow_model.py), built once: answers
    take most of a second here, so the editors see the canvas settle (dgemma/resolving)."""
    from tests.slow_model import build_slow_checkpoint

    return build_slow_checkpoint(tmp_path_factory.mktemp("slow-model"))


@pytest.fixture(scope="session")
def artifacts() -> Path:
    tools.ARTIFACTS.mkdir(exist_ok=True)
    return tools.ARTIFACTS


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A scratch copy of fixtures/editors: the editors open and save files there."""
    folder = tmp_path / "workspace"
    shutil.copytree(FIXTURES, folder, ignore=shutil.ignore_patterns("README.md"))
    return folder


def add_modules(folder: Path, count: int = 3000) -> None:
    """`count` small Python modules under folder/pkg: a workspace that takes the server seconds to index."""
    body = "".join(f"def function_{i}(value):\n    return value * {i}\n\n" for i in range(20))
    for n in range(count):
        package = folder / "pkg" / f"m{n // 100:02d}"
        package.mkdir(parents=True, exist_ok=True)
        (package / f"module_{n}.py").write_text(body)


def requires(features: ServerFeatures, name: str) -> None:
    """Skip a test of a server feature that this server does not have yet."""
    reasons = {
        "rewrite": (
            "the server advertises no refactor.rewrite code action yet (issue 4): block-rewrite test skipped"
        ),
        "next_edit": "the server does not answer dgemma/nextEdit yet (issue 4): next-edit test skipped",
    }
    if not getattr(features, name):
        pytest.skip(reasons[name])
