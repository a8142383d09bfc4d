import * as assert from "node:assert/strict";
import { test } from "node:test";
import { Freshness } from "../src/freshness";
import { parseLogLine } from "../src/logLevels";
import { describeStatus, shortModel } from "../src/statusText";
import { applyEdits, firstLineSummary, offsetAt } from "../src/textEdits";

const at = (line: number, character: number) => ({ line, character });

test("offsets clamp to the line end like VS Code", () => {
  const text = "ab\r\ncd\nef";
  assert.equal(offsetAt(text, at(0, 9)), 2);
  assert.equal(offsetAt(text, at(1, 1)), 5);
  assert.equal(offsetAt(text, at(5, 0)), text.length);
});

test("edits apply in position order against the original text", () => {
  const text = "def f(x):\n    return x\n";
  const out = applyEdits(text, [
    { start: at(1, 11), end: at(1, 12), newText: "x * 2" },
    { start: at(0, 4), end: at(0, 5), newText: "double" },
  ]);
  assert.equal(out, "def double(x):\n    return x * 2\n");
  assert.throws(() =>
    applyEdits(text, [
      { start: at(0, 0), end: at(0, 5), newText: "" },
      { start: at(0, 2), end: at(0, 3), newText: "" },
    ]),
  );
});

test("a multi-line insertion is summarised on one line", () => {
  assert.equal(firstLineSummary("x = 1"), "x = 1");
  assert.equal(firstLineSummary("x = 1\ny = 2\n"), "x = 1 ⏎ … (+2 lines)");
});

test("server log lines keep their level", () => {
  assert.deepEqual(parseLogLine("2026-12-02 16:00:00,123 WARNING dgemma_lsp.server: slow"), {
    level: "warn",
    message: "dgemma_lsp.server: slow",
  });
  assert.equal(parseLogLine("Traceback (most recent call last):").level, "error");
});

test("the status bar shows model, device and latency", () => {
  const ready = {
    state: "ready",
    model: "/tmp/tiny-model0",
    device: "cpu",
    lastLatencyMs: 87.4,
    lastSource: "typed_through",
    error: null,
  } as const;
  assert.equal(describeStatus("running", true, ready).text, "$(sparkle) DGemma: tiny-model0 · cpu · 87 ms");
  // lastLatencyMs is the model's last: a reused answer (typed through) is named, its time not shown.
  assert.match(
    describeStatus("running", true, ready).tooltip,
    /Last model completion: 87.4 ms\nLast answer from: typed through/,
  );
  const indexing = { ...ready, indexing: { files: 1234, total: 5000 } } as const;
  assert.equal(
    describeStatus("running", true, indexing).text,
    "$(sparkle) DGemma: tiny-model0 · cpu · 87 ms · indexing 1,234/5,000",
  );
  assert.match(describeStatus("running", true, { ...ready, indexing: { files: 7 } }).text, /indexing 7$/);
  assert.match(describeStatus("running", false, ready).text, /\(off\)$/);
  const failed = { ...ready, state: "failed", error: "no such folder" } as const;
  assert.match(describeStatus("running", true, failed).tooltip, /no such folder/);
  assert.ok(describeStatus("running", true, failed).error);
  const unreachable = { ...ready, error: "http://gpu-box:8000/v1: connection refused" } as const;
  assert.equal(
    describeStatus("running", true, unreachable).text,
    "$(warning) DGemma: tiny-model0 · cpu · 87 ms · failing",
  );
  assert.match(describeStatus("running", true, unreachable).tooltip, /^Last request failed: .*connection refused/);
  assert.ok(describeStatus("running", true, unreachable).error);
  assert.ok(!describeStatus("running", true, ready).error);
  assert.match(describeStatus("notFound", true, undefined).text, /no server/);
  assert.equal(shortModel("google/diffusiongemma-26B-A4B-it"), "google/diffusiongemma-26B-A4B-it");
  assert.equal(shortModel("http://gpu-box:8000/v1"), "gpu-box:8000/v1");
});

test("a suggestion is fresh until it has been shown for the delay, and only when new", () => {
  const seen: boolean[] = [];
  const timers: { run: () => void; ms: number }[] = [];
  const later = (run: () => void, ms: number) => {
    timers.push({ run, ms });
    return () => undefined;
  };
  const freshness = new Freshness(
    (fresh) => seen.push(fresh),
    () => 300,
    later,
  );
  freshness.answered("    result = words");
  assert.deepEqual(seen, [true]);
  assert.equal(timers[0]?.ms, 300);
  freshness.answered("    result = words"); // the same line again: typed through, or asked again
  assert.deepEqual(seen, [true]);
  timers[0]?.run(); // 300 ms later
  assert.deepEqual(seen, [true, false]);
  freshness.answered(undefined);
  freshness.answered("    result = words"); // gone and back: new again
  assert.deepEqual(seen, [true, false, true]);
  freshness.dispose();
});
