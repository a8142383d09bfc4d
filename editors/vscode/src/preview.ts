import * as vscode from "vscode";
import { applyEdits, firstLineSummary } from "./textEdits";

export const PREVIEW_SCHEME = "dgemma-preview";
const PENDING_KEY = "dgemma.editPending";
const INLINE_KEY = "dgemma.nextEditVisible";

type Kind = "rewrite" | "nextEdit";

interface Pending {
  kind: Kind;
  uri: vscode.Uri;
  version: number;
  edits: vscode.TextEdit[];
  previewUri?: vscode.Uri;
}

/**
 * Shows a suggested edit and applies it only when the user accepts it.
 * A block rewrite opens a diff editor (current file | proposed file) with Accept / Reject in its title;
 * a next-edit suggestion is drawn in place (the replaced text struck through, the new text after it).
 * Tab accepts and Escape rejects in both. Any change to the file drops the suggestion: it is stale.
 */
export class EditPreview implements vscode.Disposable, vscode.TextDocumentContentProvider {
  private pending: Pending | undefined;
  private message: vscode.Disposable | undefined;
  private counter = 0;
  private readonly contents = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly subscriptions: vscode.Disposable[] = [];
  private readonly removed = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor("diffEditor.removedTextBackground"),
    textDecoration: "line-through",
  });
  private readonly inserted = vscode.window.createTextEditorDecorationType({
    after: {
      color: new vscode.ThemeColor("editorGhostText.foreground"),
      backgroundColor: new vscode.ThemeColor("diffEditor.insertedTextBackground"),
      margin: "0 0 0 0.25em",
    },
  });

  constructor(private readonly log: vscode.LogOutputChannel) {
    this.subscriptions.push(
      vscode.workspace.registerTextDocumentContentProvider(PREVIEW_SCHEME, this),
      vscode.workspace.onDidChangeTextDocument((event) => {
        const pending = this.pending;
        if (pending && event.contentChanges.length > 0 && event.document.uri.toString() === pending.uri.toString()) {
          void this.clear("the file changed");
        }
      }),
      vscode.window.tabGroups.onDidChangeTabs((event) => {
        const previewUri = this.pending?.previewUri;
        if (!previewUri) {
          return;
        }
        const closed = event.closed.some(
          (tab) =>
            tab.input instanceof vscode.TabInputTextDiff && tab.input.modified.toString() === previewUri.toString(),
        );
        if (closed) {
          void this.clear("the preview was closed");
        }
      }),
    );
  }

  get active(): boolean {
    return this.pending !== undefined;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.toString()) ?? "";
  }

  /** A whole-block rewrite: a diff editor between the file and the file with the edits applied. */
  async showRewrite(document: vscode.TextDocument, edits: vscode.TextEdit[]): Promise<void> {
    await this.clear("replaced");
    const proposed = applyEdits(
      document.getText(),
      edits.map((e) => ({ start: e.range.start, end: e.range.end, newText: e.newText })),
    );
    this.counter += 1;
    const name = document.uri.path.split("/").pop() ?? "file";
    const previewUri = vscode.Uri.from({
      scheme: PREVIEW_SCHEME,
      path: `/${this.counter}/${name}`,
      query: document.uri.toString(),
    });
    this.contents.set(previewUri.toString(), proposed);
    this.pending = { kind: "rewrite", uri: document.uri, version: document.version, edits, previewUri };
    await this.setContext(true, false);
    await vscode.commands.executeCommand(
      "vscode.diff",
      document.uri,
      previewUri,
      `DiffusionGemma rewrite: ${name} (Tab accepts, Escape rejects)`,
      { preview: true, preserveFocus: false },
    );
  }

  /** A next-edit suggestion drawn in the editor. */
  async showNextEdit(editor: vscode.TextEditor, edit: vscode.TextEdit): Promise<void> {
    await this.clear("replaced");
    const document = editor.document;
    this.pending = { kind: "nextEdit", uri: document.uri, version: document.version, edits: [edit] };
    const hover = new vscode.MarkdownString();
    hover.appendMarkdown("**DiffusionGemma next edit** (Tab accepts, Escape rejects)\n\n");
    hover.appendCodeblock(edit.newText, document.languageId);
    const removedText = document.getText(edit.range);
    editor.setDecorations(this.removed, removedText ? [{ range: edit.range, hoverMessage: hover }] : []);
    editor.setDecorations(this.inserted, [
      {
        range: new vscode.Range(edit.range.end, edit.range.end),
        hoverMessage: hover,
        renderOptions: { after: { contentText: firstLineSummary(edit.newText) || "⌫" } },
      },
    ]);
    editor.revealRange(edit.range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    this.message = vscode.window.setStatusBarMessage("$(arrow-right) DGemma next edit: Tab accepts, Escape rejects");
    await this.setContext(true, true);
  }

  /** Applies the pending edit, when the file is still the one it was computed for. */
  async accept(): Promise<boolean> {
    const pending = this.pending;
    if (!pending) {
      return false;
    }
    const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === pending.uri.toString());
    if (!document || document.version !== pending.version) {
      await this.clear("stale");
      void vscode.window.showWarningMessage(
        "DiffusionGemma: the file changed since the suggestion; nothing was applied.",
      );
      return false;
    }
    this.pending = undefined; // our own edit must not look like a user change that drops the suggestion
    const edit = new vscode.WorkspaceEdit();
    edit.set(pending.uri, pending.edits);
    const applied = await vscode.workspace.applyEdit(edit);
    this.log.info(`${pending.kind} ${applied ? "accepted" : "could not be applied"}`);
    await this.finish(pending);
    if (pending.kind === "rewrite") {
      await vscode.window.showTextDocument(document, { preview: false });
    }
    return applied;
  }

  async reject(): Promise<void> {
    await this.clear("rejected");
  }

  private async clear(reason: string): Promise<void> {
    const pending = this.pending;
    if (!pending) {
      return;
    }
    this.pending = undefined;
    this.log.debug(`${pending.kind} suggestion dropped: ${reason}`);
    await this.finish(pending);
    if (pending.kind === "rewrite" && reason === "rejected") {
      const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === pending.uri.toString());
      if (document) {
        await vscode.window.showTextDocument(document, { preview: false });
      }
    }
  }

  private async finish(pending: Pending): Promise<void> {
    this.message?.dispose();
    this.message = undefined;
    await this.setContext(false, false);
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document.uri.toString() === pending.uri.toString()) {
        editor.setDecorations(this.removed, []);
        editor.setDecorations(this.inserted, []);
      }
    }
    const previewUri = pending.previewUri;
    if (previewUri) {
      const tabs = vscode.window.tabGroups.all
        .flatMap((group) => group.tabs)
        .filter(
          (tab) =>
            tab.input instanceof vscode.TabInputTextDiff && tab.input.modified.toString() === previewUri.toString(),
        );
      if (tabs.length > 0) {
        await vscode.window.tabGroups.close(tabs);
      }
      this.contents.delete(previewUri.toString());
    }
  }

  private async setContext(pending: boolean, inline: boolean): Promise<void> {
    await vscode.commands.executeCommand("setContext", PENDING_KEY, pending);
    await vscode.commands.executeCommand("setContext", INLINE_KEY, inline);
  }

  dispose(): void {
    for (const s of this.subscriptions) {
      s.dispose();
    }
    this.removed.dispose();
    this.inserted.dispose();
    this.changed.dispose();
  }
}
