// What the status bar item says for a server status. No `vscode` import: unit-tested in node.
import type { ServerStatus } from "./protocol";

export type ClientPhase = "starting" | "running" | "stopped" | "notFound";

export interface StatusView {
  text: string;
  tooltip: string;
  error: boolean;
}

/** A short model name: the last folder of a path, an id or URL as it is. */
export function shortModel(model: string | null): string {
  if (!model) {
    return "model";
  }
  if (/^[a-z]+:\/\//i.test(model)) {
    return model.replace(/^[a-z]+:\/\//i, "");
  }
  if (model.startsWith("/") || model.startsWith("~") || /^[A-Za-z]:[\\/]/.test(model) || model.startsWith(".")) {
    const parts = model.split(/[\\/]/).filter((p) => p !== "");
    return parts[parts.length - 1] ?? model;
  }
  return model;
}

/** Thousands separated by commas: 1,234. */
export function count(n: number): string {
  return Math.round(n)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

export function describeStatus(phase: ClientPhase, enabled: boolean, status: ServerStatus | undefined): StatusView {
  if (phase === "notFound") {
    return {
      text: "$(warning) DGemma: no server",
      tooltip: "dgemma-lsp was not found: set dgemma.server.path (click for the menu)",
      error: true,
    };
  }
  if (phase === "stopped") {
    return {
      text: "$(debug-stop) DGemma: stopped",
      tooltip: "The server is not running (click for the menu)",
      error: true,
    };
  }
  const off = enabled ? "" : " (off)";
  if (phase === "starting" || status === undefined || status.state === "none") {
    return { text: `$(loading~spin) DGemma${off}`, tooltip: "Starting dgemma-lsp", error: false };
  }
  const model = shortModel(status.model);
  if (status.state === "loading") {
    return {
      text: `$(loading~spin) DGemma: loading ${model}${off}`,
      tooltip: `Loading ${status.model ?? ""}`,
      error: false,
    };
  }
  if (status.state === "failed") {
    return {
      text: `$(error) DGemma: ${model} failed`,
      tooltip: `Could not load ${status.model ?? "the model"}: ${status.error ?? "see the log"}`,
      error: true,
    };
  }
  const parts = [model];
  if (status.device) {
    parts.push(status.device);
  }
  if (status.lastLatencyMs !== null && status.lastLatencyMs !== undefined) {
    parts.push(`${Math.round(status.lastLatencyMs)} ms`); // the model's: a reused answer leaves it
  }
  const indexing = status.indexing;
  if (indexing) {
    const total = typeof indexing.total === "number" ? `/${count(indexing.total)}` : "";
    parts.push(`indexing ${count(indexing.files)}${total}`);
  }
  const failing = Boolean(status.error); // ready, but the last engine call failed (a remote server)
  const icon = failing ? "$(warning)" : enabled ? "$(sparkle)" : "$(circle-slash)";
  const tooltip = [
    ...(failing ? [`Last request failed: ${status.error}`] : []),
    `Model: ${status.model ?? "?"}`,
    `Device: ${status.device ?? "?"}`,
    `Last model completion: ${status.lastLatencyMs !== null ? `${status.lastLatencyMs} ms` : "none yet"}`,
    ...(status.lastSource ? [`Last answer from: ${status.lastSource.replace("_", " ")}`] : []),
    ...(indexing ? [`Indexing the workspace: ${count(indexing.files)} files so far`] : []),
    enabled ? "Inline completions on" : "Inline completions off",
    "Click for the menu",
  ].join("\n");
  if (failing) {
    parts.push("failing");
  }
  return { text: `${icon} DGemma: ${parts.join(" · ")}${off}`, tooltip, error: failing };
}
