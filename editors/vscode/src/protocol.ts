// The server's custom messages (defined in dgemma_lsp/lsp/messages.py) and the kinds this extension asks for.

export const STATUS_NOTIFICATION = "dgemma/status";
/**
 * What the extension declares under the `experimental` client capability: the server sends its custom
 * notifications only to clients that declare them (every other client gets standard LSP only).
 */
// Not `confidence`: VS Code's inline suggestion cannot be drawn in parts (README, "As it settles").
export const EXPERIMENTAL_CAPABILITIES = { dgemma: { status: true, resolving: true } };
/** A slow completion's text so far, as runs of settled and unsettled text (docs/protocol.md). */
export const RESOLVING_NOTIFICATION = "dgemma/resolving";
export const NEXT_EDIT_REQUEST = "dgemma/nextEdit";
export const REWRITE_KIND = "refactor.rewrite";

export type ModelState = "none" | "loading" | "ready" | "failed";

/** Params of the `dgemma/status` notification, sent after loads and after each completion. */
export interface ServerStatus {
  state: ModelState;
  model: string | null;
  device: string | null;
  /** Of the last answer the model computed (a reused answer leaves it as it was). */
  lastLatencyMs: number | null;
  /** Where the last answer came from: model, lookup, structure, next_token, typed_through, cache or speculative. */
  lastSource: string | null;
  error: string | null;
  /** How far the workspace index is, while it is built; null otherwise (or from an older server). */
  indexing?: IndexProgress | null;
}

/** `dgemma/status`'s `indexing`: files indexed so far, and the total when the server knows it. */
export interface IndexProgress {
  files: number;
  total?: number | null;
}

export interface LspPosition {
  line: number;
  character: number;
}

export interface LspRange {
  start: LspPosition;
  end: LspPosition;
}

/** Result of `dgemma/nextEdit` when the server has a suggestion (it answers `null` otherwise). */
export interface NextEdit {
  range: LspRange;
  newText: string;
  confidence?: number;
}

export function isServerStatus(value: unknown): value is ServerStatus {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  const state = (value as { state?: unknown }).state;
  return state === "none" || state === "loading" || state === "ready" || state === "failed";
}

function isPosition(value: unknown): value is LspPosition {
  const p = value as LspPosition | null;
  return typeof p === "object" && p !== null && Number.isInteger(p.line) && Number.isInteger(p.character);
}

export function isNextEdit(value: unknown): value is NextEdit {
  const edit = value as NextEdit | null;
  return (
    typeof edit === "object" &&
    edit !== null &&
    typeof edit.newText === "string" &&
    typeof edit.range === "object" &&
    edit.range !== null &&
    isPosition(edit.range.start) &&
    isPosition(edit.range.end)
  );
}

/** Where an inline completion request was asked: the document, its version and the position. */
export interface AskedAt {
  uri: string;
  version: number;
  position: LspPosition;
}

export interface Span {
  text: string;
  /** The model is sure of this run; the rest may still change at the next step. */
  settled: boolean;
}

/** Params of `dgemma/resolving`. */
export interface ResolvingParams {
  textDocument: { uri: string };
  version: number;
  position: LspPosition;
  requestId: number | string;
  spans: Span[];
}

function isAskedAt(value: unknown): boolean {
  const v = value as ResolvingParams | null;
  return (
    typeof v === "object" &&
    v !== null &&
    typeof v.textDocument?.uri === "string" &&
    Number.isInteger(v.version) &&
    isPosition(v.position)
  );
}

export function isResolvingParams(value: unknown): value is ResolvingParams {
  const spans = (value as ResolvingParams | null)?.spans;
  return (
    isAskedAt(value) &&
    Array.isArray(spans) &&
    spans.every((s) => typeof s?.text === "string" && typeof s.settled === "boolean")
  );
}
