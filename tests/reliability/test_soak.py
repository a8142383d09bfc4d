"""Cancellation storm and soak: fast typing with a completion request per keystroke, most of them
cancelled by the next keystroke as editors do, for 30 s (5 minutes with --long).

Asserted: every request is answered (a result, or RequestCancelled), no RSS growth beyond 5% after
warm-up, and the worker is never stuck: the last request, sent into the storm, is answered (within a
generous guard; how fast is a printed figure, not an assertion).
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

from tests.reliability.wire import RawServer

BUDGET_MS = 150
# A failure guard, not a speed goal: a stuck worker or a queue that grows never answers within it.
STUCK_MS = 15_000
REQUEST_CANCELLED = -32800
BASE = "import os\n\n\ndef total(values):\n    s = '😀 é'\n    return sum(values)\n\n\n"
TYPED = "abcdefgh_ (),.:=😀é𝔘1"


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class Typist:
    """Types at the end of the document, with backspaces, new lines, cursor jumps and a periodic
    cleanup that keeps the document's size bounded (so memory measures the server, not the text)."""

    def __init__(self, server: RawServer, uri: str, rng: random.Random) -> None:
        self.server, self.uri, self.rng = server, uri, rng
        self.first = BASE.count("\n")  # the typed region starts on this line
        self.line, self.text, self.version = self.first, "", 1

    def _change(self, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        self.version += 1
        rng = {
            "start": {"line": start[0], "character": start[1]},
            "end": {"line": end[0], "character": end[1]},
        }
        self.server.change(self.uri, self.version, [{"range": rng, "text": text}])

    def keystroke(self) -> tuple[int, int]:
        """One edit; returns where the completion is asked."""
        roll = self.rng.random()
        here = (self.line, utf16(self.text))
        if self.line - self.first > 30:
            self._change((self.first, 0), here, "")
            self.line, self.text = self.first, ""
        elif roll < 0.1 and self.text:
            last = self.text[-1]
            self._change((self.line, here[1] - utf16(last)), here, "")
            self.text = self.text[:-1]
        elif roll < 0.17:
            self._change(here, here, "\n    ")
            self.line, self.text = self.line + 1, "    "
        elif roll < 0.2:
            return self.rng.randrange(self.first), 0  # the cursor jumps up; nothing typed
        else:
            char = self.rng.choice(TYPED)
            self._change(here, here, char)
            self.text += char
        return self.line, utf16(self.text)


def test_typing_storm_with_cancellations(
    tiny_model_dir: Path, tmp_path: Path, figures: dict, long_mode: bool
) -> None:
    duration, warmup = (300.0, 30.0) if long_mode else (30.0, 5.0)
    server = RawServer(stderr_path=tmp_path / "stderr.log")
    server.initialize(
        {"model": str(tiny_model_dir), "device": "cpu", "completion": {"latencyBudgetMs": BUDGET_MS}}
    )
    server.wait_for_model()
    uri = "file:///soak/typing.py"
    server.open(uri, BASE)
    typist = Typist(server, uri, random.Random(7))
    sent: list[int] = []
    cancelled = pauses = 0
    samples: list[tuple[float, int]] = []
    baseline: int | None = None
    started = time.monotonic()
    next_sample = started
    try:
        while (now := time.monotonic()) - started < warmup + duration:
            line, character = typist.keystroke()
            previous = sent[-1] if sent else None
            sent.append(
                server.request_async(
                    "textDocument/inlineCompletion", server.inline_params(uri, line, character)
                )
            )
            if previous is not None and typist.rng.random() < 0.8:
                server.notify("$/cancelRequest", {"id": previous})  # the editor drops the old request
                cancelled += 1
            if now >= next_sample:
                rss = server.rss_kb()
                if baseline is None and now - started >= warmup:
                    baseline = rss
                samples.append((now - started, rss))
                next_sample = now + 1.0
            if len(sent) % 20 == 0:
                time.sleep(0.5)  # a pause after a burst: completions get to finish
                pauses += 1
            else:
                time.sleep(typist.rng.uniform(0.01, 0.06))  # 15-100 keystrokes a second

        # The last keystroke goes into the storm: nothing is drained first.
        line, character = typist.keystroke()
        asked = time.monotonic()
        last = server.request_async(
            "textDocument/inlineCompletion", server.inline_params(uri, line, character)
        )
        answer = server.wait_response(last, timeout=30)
        last_ms = (time.monotonic() - asked) * 1000
        assert "result" in answer, answer

        codes: dict[object, int] = {}
        for msg_id in sent:
            reply = server.wait_response(msg_id, timeout=30)
            kind = "result" if "result" in reply else reply["error"]["code"]
            codes[kind] = codes.get(kind, 0) + 1
        stats = server.stats()
        final = server.rss_kb()
        assert server.alive()
    finally:
        exit_code = server.close()

    assert exit_code == 0
    assert set(codes) <= {"result", REQUEST_CANCELLED}, codes
    # Requests left standing at a pause are answered by the model (or the cache), not all superseded.
    assert stats["answered"] >= pauses // 2, (stats, pauses)
    assert baseline is not None
    after = [rss for t, rss in samples if t >= warmup]
    drift = (final - baseline) / baseline
    figures["soak: length after warm-up (s)"] = duration
    figures["soak: completion requests (one per keystroke or cursor jump), pauses, cancelRequests"] = (
        len(sent) + 1, pauses, cancelled,
    )  # fmt: skip
    figures["soak: answers (result, RequestCancelled)"] = (
        codes.get("result", 0),
        codes.get(REQUEST_CANCELLED, 0),
    )
    figures["soak: server stats (answered, cancelled, superseded, sources)"] = (
        stats["answered"], stats["cancelled"], stats["superseded"], stats["sources"],
    )  # fmt: skip
    figures["soak: RSS after warm-up, median, max, final (MB)"] = (
        baseline // 1024, int(statistics.median(after)) // 1024, max(after) // 1024, final // 1024,
    )  # fmt: skip
    figures["soak: RSS drift after warm-up"] = f"{drift:+.1%}"
    figures["soak: last request answered in (ms, budget 150)"] = round(last_ms)
    assert drift <= 0.05, (baseline, final, samples)
    assert last_ms <= STUCK_MS, last_ms
