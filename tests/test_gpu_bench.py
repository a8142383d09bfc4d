"""The GPU measurement script runs end to end on CPU with a tiny config; what it reports is checked against
what the model itself counts it did (forward passes, returned ids), never against its own arithmetic."""

from __future__ import annotations

import json
import statistics

import pytest
import torch

from evaluation import gpu_bench
from evaluation.gpu_bench import RELEASED_TEXT, active_parameters, build, main


def test_released_shape_has_the_published_parameter_counts():
    model = build(tiny=False, device="meta", dtype=torch.bfloat16)  # shapes only, no memory
    total = sum(p.numel() for p in model.parameters())
    assert 25.0e9 < total < 25.5e9  # "about 25.2B parameters"
    assert 3.7e9 < active_parameters(model) < 3.9e9  # "3.8B active"
    assert model.config.get_text_config().num_hidden_layers == RELEASED_TEXT["num_hidden_layers"] == 30


class Counter:
    """Counts, from the model itself, what each run of a path did: decoder forward passes (denoising
    steps), and tokens in the ids it returned (ours: the canvas `denoise` handed back; generate: the
    sequences past the prompt; autoregressive: one-token encoder forwards, each writing one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runs: list[tuple[str, int | None, int, int]] = []  # (path, steps asked, forwards, tokens)
        self.forwards = self.one_token_forwards = 0
        self.returned: torch.Tensor | None = None
        self.prompt_len = 0
        real_build, real_denoise = gpu_bench.build, gpu_bench.denoise

        def build(*args, **kwargs):
            model = real_build(*args, **kwargs)
            model.model.decoder.register_forward_hook(lambda *_: self._step())
            model.model.encoder.register_forward_hook(self._encoded, with_kwargs=True)
            real_generate = model.generate

            def generate(prompt, **options):
                out = real_generate(prompt, **options)
                self.returned = (out.sequences if hasattr(out, "sequences") else out)[:, prompt.shape[1] :]
                return out

            model.generate = generate
            return model

        def denoise(*args, **kwargs):
            outcome = real_denoise(*args, **kwargs)
            self.returned = outcome.tokens
            return outcome

        monkeypatch.setattr(gpu_bench, "build", build)
        monkeypatch.setattr(gpu_bench, "denoise", denoise)
        for name in ("ours", "generate", "autoregressive"):
            monkeypatch.setattr(gpu_bench, name, self._counted(name, getattr(gpu_bench, name)))

    def _step(self) -> None:
        self.forwards += 1

    def _encoded(self, module, args, kwargs, output) -> None:
        ids = kwargs.get("input_ids")
        self.one_token_forwards += ids is not None and ids.shape[1] == 1

    def _counted(self, name: str, path):
        def run(model, prompt, *args):
            self.forwards = self.one_token_forwards = 0
            self.returned = None
            sample = path(model, prompt, *args)
            if name == "autoregressive":
                tokens, steps = self.one_token_forwards, None
            else:
                tokens, steps = int(self.returned[0].numel()), args[0]
            self.runs.append((name, steps, self.forwards, tokens))
            return sample

        return run


def test_tiny_run_reports_what_the_model_counted_and_rates_from_those_counts(tmp_path, monkeypatch, capsys):
    counter = Counter(monkeypatch)
    out = tmp_path / "gpu.json"
    argv = ["--tiny", "--prompt-tokens", "32", "--ar-tokens", "8", "--canvas", "32", "--steps", "2,4",
            "--repeats", "2", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    figures = json.loads(out.read_text())
    paths = {(p["path"], p["steps"]): p for p in figures["paths"]}
    assert set(paths) == {
        ("ours", 2),
        ("ours", 4),
        ("generate", 2),
        ("generate", 4),
        ("autoregressive", None),
    }
    for (name, steps), path in paths.items():
        runs = [r for r in counter.runs if r[0] == name and r[1] == steps]
        assert len(runs) == path["runs"] + 1  # a warm-up, then the timed runs
        tokens = statistics.median(t for *_, t in runs[1:])
        assert path["tokens"] == tokens  # as counted from the ids the path returned
        if steps is not None:
            assert {forwards for _, _, forwards, _ in runs} == {steps}  # each run took exactly its steps
        assert path["tokens_per_s"] == pytest.approx(tokens / (path["median_ms"] / 1000), rel=1e-9)
    assert "tok/s without prefill" in capsys.readouterr().out
