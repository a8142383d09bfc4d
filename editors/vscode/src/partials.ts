// Which request a `dgemma/resolving` partial belongs to, and what is drawn of it. No `vscode` import:
// unit-tested in node.
import type { AskedAt, LspPosition, ResolvingParams, Span } from "./protocol";

/** Whether two inline completion requests were asked at the same document version and position. */
export function sameAsk(a: AskedAt, b: AskedAt): boolean {
  return a.uri === b.uri && a.version === b.version && samePosition(a.position, b.position);
}

function samePosition(a: LspPosition, b: LspPosition): boolean {
  return a.line === b.line && a.character === b.character;
}

/**
 * The spans as one line can show them: a decoration is drawn on the request's line only, so the text
 * stops at the first line break. Empty runs are left out.
 */
export function firstLine(spans: readonly Span[]): Span[] {
  const shown: Span[] = [];
  for (const span of spans) {
    const cut = span.text.indexOf("\n");
    const text = cut < 0 ? span.text : span.text.slice(0, cut);
    if (text !== "") {
      shown.push({ text, settled: span.settled });
    }
    if (cut >= 0) {
      break;
    }
  }
  return shown;
}

export interface Shown {
  at: AskedAt;
  spans: Span[];
}

/**
 * The partial of the one request in flight. vscode-languageclient does not show the ids of the requests
 * it sends, so a partial is matched by its request's document, version and position (docs/protocol.md):
 * one from an older request, or from none, is dropped. `draw` gets what to show, or undefined to remove
 * it: at a newer request, at the answer, at an edit, when the cursor moves away.
 */
export class Partials {
  private asked: { ticket: number; at: AskedAt } | undefined;
  private tickets = 0;
  private shown: Shown | undefined;

  constructor(private readonly draw: (shown: Shown | undefined) => void) {}

  /** A request starts: what was drawn for an older one goes; returns the ticket `answered` takes. */
  ask(at: AskedAt): number {
    this.tickets += 1;
    this.asked = { ticket: this.tickets, at };
    this.clear();
    return this.tickets;
  }

  /** The request `ticket` has its answer (or was cancelled): its partial goes. */
  answered(ticket: number): void {
    if (this.asked?.ticket === ticket) {
      this.asked = undefined;
      this.clear();
    }
  }

  /** A `dgemma/resolving` notification: drawn when it belongs to the request in flight. */
  resolving(params: ResolvingParams): boolean {
    const at = this.matching(params);
    if (at === undefined) {
      return false;
    }
    const spans = firstLine(params.spans);
    this.shown = spans.length > 0 ? { at, spans } : undefined;
    this.draw(this.shown);
    return true;
  }

  /** The document `uri` is at `version` now: a request asked at another version is out of date (VS Code
   * asks again), and what was drawn for it goes; nothing more of it is drawn. */
  edited(uri: string, version: number): void {
    if (this.asked?.at.uri === uri && this.asked.at.version !== version) {
      this.drop();
    }
  }

  /** The cursor is at `position` of `uri` now: a request asked elsewhere is out of date (as at an edit). */
  moved(uri: string, position: LspPosition): void {
    const at = this.asked?.at;
    if (at !== undefined && (at.uri !== uri || !samePosition(at.position, position))) {
      this.drop();
    }
  }

  /** The request in flight is out of date (the editor closed, completions turned off): nothing of it
   * is drawn any more. */
  drop(): void {
    this.asked = undefined;
    this.clear();
  }

  private clear(): void {
    if (this.shown !== undefined) {
      this.shown = undefined;
      this.draw(undefined);
    }
  }

  get drawn(): Shown | undefined {
    return this.shown;
  }

  private matching(params: ResolvingParams): AskedAt | undefined {
    const at: AskedAt = { uri: params.textDocument.uri, version: params.version, position: params.position };
    return this.asked !== undefined && sameAsk(this.asked.at, at) ? this.asked.at : undefined;
  }
}

/** The settled runs a partial starts with, joined, and the rest of its text (settled runs after an
 * unsettled one included). */
export function headAndRest(spans: readonly Span[]): { head: string; rest: string } {
  const unsure = spans.findIndex((span) => !span.settled);
  const cut = unsure < 0 ? spans.length : unsure;
  const join = (runs: readonly Span[]) => runs.map((span) => span.text).join("");
  return { head: join(spans.slice(0, cut)), rest: join(spans.slice(cut)) };
}
