// Text edits on plain strings (preview contents), without VS Code: unit-tested in node.
import type { LspPosition } from "./protocol";

export interface PlainEdit {
  start: LspPosition;
  end: LspPosition;
  newText: string;
}

/** The offset (in UTF-16 code units, VS Code's encoding) of a position; clamped like VS Code does. */
export function offsetAt(text: string, position: LspPosition): number {
  let offset = 0;
  for (let line = 0; line < position.line; line++) {
    const next = text.indexOf("\n", offset);
    if (next === -1) {
      return text.length;
    }
    offset = next + 1;
  }
  let end = text.indexOf("\n", offset);
  if (end === -1) {
    end = text.length;
  } else if (end > offset && text[end - 1] === "\r") {
    end -= 1;
  }
  return Math.min(offset + Math.max(0, position.character), end);
}

/** `text` with non-overlapping `edits` applied (positions refer to the original text). */
export function applyEdits(text: string, edits: readonly PlainEdit[]): string {
  const spans = edits
    .map((e) => ({ from: offsetAt(text, e.start), to: offsetAt(text, e.end), newText: e.newText }))
    .sort((a, b) => a.from - b.from || a.to - b.to);
  let out = "";
  let at = 0;
  for (const span of spans) {
    if (span.from < at) {
      throw new Error("overlapping edits");
    }
    out += text.slice(at, span.from) + span.newText;
    at = Math.max(at, span.to);
  }
  return out + text.slice(at);
}

/** A one-line summary of inserted text for a decoration: the first line, and how many follow. */
export function firstLineSummary(newText: string): string {
  const lines = newText.split("\n");
  const first = lines[0] ?? "";
  return lines.length > 1 ? `${first} ⏎ … (+${lines.length - 1} lines)` : first;
}
