import * as vscode from "vscode";
import { headAndRest, type Shown } from "./partials";

/** The theme colour of a partial's unsettled text (package.json `contributes.colors`): dimmer than ghost text. */
export const UNSETTLED_COLOR = "dgemma.unsettledForeground";

/**
 * Draws a slow completion's partial at the cursor as one decoration: its settled head (the settled runs
 * it starts with) as `before` text in the ghost-text colour, the rest as `after` text, dimmer. A
 * decoration, not an inline suggestion: VS Code accepts whatever inline suggestion it shows, and a
 * partial must never be accepted (Tab then does what it does without one). The final suggestion, drawn
 * by VS Code, takes its place.
 *
 * Two pieces, not one per run: VS Code orders the pieces drawn at one column by their CSS class, a hash
 * of each piece's render options, so only a decoration's `before` and `after` text come in a known order.
 */
export class PartialView implements vscode.Disposable {
  private readonly type = vscode.window.createTextEditorDecorationType({});
  private drawnIn: vscode.TextEditor[] = [];

  draw(shown: Shown | undefined): void {
    const editors =
      shown === undefined
        ? []
        : vscode.window.visibleTextEditors.filter((editor) => editor.document.uri.toString() === shown.at.uri);
    for (const editor of this.drawnIn) {
      if (!editors.includes(editor)) {
        editor.setDecorations(this.type, []);
      }
    }
    this.drawnIn = editors;
    if (shown === undefined) {
      return;
    }
    const at = new vscode.Position(shown.at.position.line, shown.at.position.character);
    const { head, rest } = headAndRest(shown.spans);
    const piece: vscode.DecorationOptions = {
      range: new vscode.Range(at, at),
      renderOptions: {
        before:
          head === "" ? undefined : { contentText: head, color: new vscode.ThemeColor("editorGhostText.foreground") },
        after: rest === "" ? undefined : { contentText: rest, color: new vscode.ThemeColor(UNSETTLED_COLOR) },
      },
    };
    for (const editor of editors) {
      editor.setDecorations(this.type, [piece]); // replaces the last partial
    }
  }

  dispose(): void {
    this.type.dispose();
  }
}
