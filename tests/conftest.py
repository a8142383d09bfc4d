from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny_model import build_tiny_checkpoint


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in tests/reliability: pytest reads options only from the root conftest early enough.
    parser.addoption(
        "--long", action="store_true", default=False, help="reliability suite: 5-minute soak, more fuzzing"
    )


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight DiffusionGemma checkpoint with its own tokenizer, built once per test session."""
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir: Path):
    from engine import load_engine

    return load_engine(str(tiny_model_dir), device="cpu")


@pytest.fixture
def own_engine(tiny_model_dir: Path):
    """A one-thread engine no other test shares, for tests that change its head or read its caches
    (the process's torch thread count restored after)."""
    import torch

    from engine import load_engine

    before = torch.get_num_threads()
    yield load_engine(str(tiny_model_dir), device="cpu", threads=1)
    torch.set_num_threads(before)


@pytest.fixture
def canvas_specs(monkeypatch: pytest.MonkeyPatch) -> list:
    """The canvas specs the local engine hands its sampler, in order (a spy: the sampler still runs)."""
    import engine.local_engine as local_engine

    seen = []
    real = local_engine.denoise

    def spy(model, cache, spec, *args, **kwargs):
        seen.append(spec)
        return real(model, cache, spec, *args, **kwargs)

    monkeypatch.setattr(local_engine, "denoise", spy)
    return seen
