"""An engine on another machine: an OpenAI-compatible server (vLLM or SGLang serving DiffusionGemma).

How a team shares one GPU box. The request is a chat completion carrying the same instruction the
local Gemma 4 chat format uses; the answer's text is the middle. Only used when the user gives a
URL as the model: nothing leaves the machine otherwise.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request

from engine.api import (
    AllocationWindow,
    Candidate,
    EngineError,
    EngineInfo,
    InfillRequest,
    InfillResult,
    Timings,
)
from engine.prompts import CURSOR_MARK, INSTRUCTION, strip_fences

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0


class RemoteEngine:
    def __init__(self, url: str, model: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.base = url.rstrip("/").removesuffix("/v1")
        self.timeout_s = timeout_s
        self.model = model or self._first_model()
        self.info = EngineInfo(
            name=url, source=f"{self.base} ({self.model})", family="remote", device="remote", dtype="remote",
            canvas_length=0, parameters=0,
        )  # fmt: skip

    def _call(self, path: str, payload: dict | None, timeout: float) -> dict:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            self.base + path,
            data=data,
            headers={"Content-Type": "application/json"},
            method="POST" if data else "GET",
        )
        try:
            with urllib.request.urlopen(request, timeout=max(timeout, 0.05)) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError) as err:
            raise EngineError(f"remote engine at {self.base}: {err}") from err

    def _first_model(self) -> str:
        models = self._call("/v1/models", None, self.timeout_s).get("data") or []
        if not models:
            raise EngineError(f"remote engine at {self.base} serves no model (GET /v1/models is empty)")
        return models[0]["id"]

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1  # no tokenizer here; windows only need an estimate

    def token_spans(self, text: str) -> None:
        return None  # the server's canvas is out of reach: no targeted renoising

    def reset_cache(self) -> None:
        pass  # the server keeps its own cache

    def use_allocation_window(self, window: AllocationWindow) -> None:
        pass  # the model runs elsewhere: nothing large is allocated here

    def close(self) -> None:
        pass

    def infill(self, request: InfillRequest) -> InfillResult:
        if request.decoder != "diffusion":
            raise EngineError("a remote engine decodes as its server does: no autoregressive comparison")
        started = time.perf_counter()
        timeout = self.timeout_s
        if request.deadline is not None:
            timeout = min(timeout, request.deadline - time.monotonic())
        content = INSTRUCTION.format(
            language=request.language or "source",
            mark=CURSOR_MARK,
            prefix=request.with_lead_in_prefix().prefix,  # its server tokenizes the text its own way
            suffix=request.suffix,
        )
        reply = self._call(
            "/v1/chat/completions",
            {
                "model": self.model,
                "messages": [{"role": "user", "content": content}],
                "max_tokens": request.max_new_tokens,
                "n": request.n_candidates,
                "temperature": 0.0 if request.n_candidates == 1 else 0.7,
            },
            timeout,
        )
        texts = [
            strip_fences((choice.get("message") or {}).get("content") or "")
            for choice in reply.get("choices", [])
        ]
        unique = list(dict.fromkeys(texts))
        elapsed = (time.perf_counter() - started) * 1000
        return InfillResult(
            candidates=tuple(Candidate(text=t, token_ids=(), confidence=()) for t in unique),
            steps=0,
            tokens_per_forward=0.0,
            stop_reason="eos",
            timings=Timings(prefill_ms=0.0, denoise_ms=elapsed, total_ms=elapsed),
            prompt_tokens=int((reply.get("usage") or {}).get("prompt_tokens", 0)),
            reused_prompt_tokens=0,
        )
