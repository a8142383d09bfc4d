import * as assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_SERVER_OPTIONS, languageEnabled, serverOptions } from "../src/settings";

test("no settings give the server's own defaults", () => {
  assert.deepEqual(
    serverOptions(() => undefined),
    DEFAULT_SERVER_OPTIONS,
  );
});

test("settings map to the server's camelCase option tree", () => {
  const values: Record<string, unknown> = {
    model: " /models/tiny ",
    device: "cuda:1",
    threads: 4,
    "context.prefixTokens": 512,
    "completion.latencyBudgetMs": 0,
    "completion.candidates": 3,
    "completion.languages": ["python", 7, ""],
    "completion.eagerness": "quiet",
    "completion.trigger": "manual",
    debugLog: true,
  };
  const options = serverOptions((key) => values[key]);
  assert.equal(options.model, "/models/tiny");
  assert.equal(options.device, "cuda:1");
  assert.equal(options.threads, 4);
  assert.deepEqual(options.context, { prefixTokens: 512, suffixTokens: 256 });
  assert.equal(options.completion.latencyBudgetMs, 0);
  assert.equal(options.completion.candidates, 3);
  assert.deepEqual(options.completion.languages, ["python"]);
  assert.equal(options.completion.eagerness, "quiet");
  assert.equal(options.completion.trigger, "manual");
  assert.equal(options.debugLog, true);
});

test("values the server would refuse fall back to the defaults", () => {
  const values: Record<string, unknown> = {
    model: "  ",
    threads: -1,
    "context.suffixTokens": 0,
    "completion.candidates": 1.5,
    "completion.maxTokensMultiLine": "many",
    "completion.eagerness": "loud",
    "completion.trigger": 1,
  };
  const options = serverOptions((key) => values[key]);
  assert.equal(options.model, "default");
  assert.equal(options.threads, 0);
  assert.equal(options.context.suffixTokens, 256);
  assert.equal(options.completion.candidates, 1);
  assert.equal(options.completion.maxTokensMultiLine, 96);
  assert.equal(options.completion.eagerness, "balanced");
  assert.equal(options.completion.trigger, "automatic");
});

test("an empty language list enables every language", () => {
  assert.ok(languageEnabled([], "rust"));
  assert.ok(languageEnabled(["python"], "python"));
  assert.ok(!languageEnabled(["python"], "rust"));
});

test("an unset or invalid latency budget is not sent, so the server picks one by device", () => {
  for (const value of [undefined, null, -3, 2.5]) {
    const options = serverOptions((key) => (key === "completion.latencyBudgetMs" ? value : undefined));
    assert.equal("latencyBudgetMs" in options.completion, false, String(value));
  }
  assert.equal(
    serverOptions((key) => (key === "completion.latencyBudgetMs" ? 90 : undefined)).completion.latencyBudgetMs,
    90,
  );
});
