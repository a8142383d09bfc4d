import * as vscode from "vscode";
import { type LanguageClient, ResponseError } from "vscode-languageclient/node";
import { SECTION, ServerManager, settings, UnsupportedError } from "./client";
import { EditPreview } from "./preview";
import { isNextEdit, NEXT_EDIT_REQUEST } from "./protocol";
import { RESTART_SETTINGS, SERVER_SETTINGS } from "./settings";
import { StatusBar } from "./status";

const METHOD_NOT_FOUND = -32601;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel("DiffusionGemma", { log: true });
  const statusBar = new StatusBar();
  const server = new ServerManager(log, statusBar);
  const preview = new EditPreview(log);
  const nextEdits = new NextEdits(server, preview, log);
  statusBar.setEnabled(settings().get<boolean>("enable", true));
  context.subscriptions.push(log, statusBar, server, preview, nextEdits);

  const command = (id: string, run: (...args: never[]) => unknown) =>
    context.subscriptions.push(vscode.commands.registerCommand(id, run));

  command("dgemma.toggle", async () => {
    const enabled = !settings().get<boolean>("enable", true);
    await settings().update("enable", enabled, vscode.ConfigurationTarget.Global);
    if (!enabled) {
      await vscode.commands.executeCommand("editor.action.inlineSuggest.hide");
    }
  });
  command("dgemma.restart", () => server.restart());
  command("dgemma.showLog", () => log.show());
  command("dgemma.showMenu", () => showMenu());
  command("dgemma.rewriteBlock", (uri?: vscode.Uri, range?: vscode.Range) =>
    rewriteBlock(server, preview, log, uri, range),
  );
  command("dgemma.suggestNextEdit", () => nextEdits.suggest(true));
  command("dgemma.acceptEdit", () => preview.accept());
  command("dgemma.rejectEdit", () => preview.reject());

  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration(SECTION)) {
        return;
      }
      if (event.affectsConfiguration(`${SECTION}.enable`)) {
        statusBar.setEnabled(settings().get<boolean>("enable", true));
      }
      if (RESTART_SETTINGS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        log.info("server settings changed: restarting");
        await server.restart();
        return;
      }
      if (SERVER_SETTINGS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        await server.sendSettings();
      }
    }),
  );

  await server.start();
}

export function deactivate(): void {
  // Everything is in context.subscriptions; the ServerManager stops the server there.
}

async function showMenu(): Promise<void> {
  const enabled = settings().get<boolean>("enable", true);
  const items: (vscode.QuickPickItem & { command: string; args?: unknown[] })[] = [
    {
      label: enabled ? "$(circle-slash) Turn inline completions off" : "$(sparkle) Turn inline completions on",
      command: "dgemma.toggle",
    },
    { label: "$(wand) Rewrite block", command: "dgemma.rewriteBlock" },
    { label: "$(arrow-right) Suggest next edit", command: "dgemma.suggestNextEdit" },
    { label: "$(debug-restart) Restart server", command: "dgemma.restart" },
    { label: "$(output) Show log", command: "dgemma.showLog" },
    { label: "$(settings-gear) Settings", command: "workbench.action.openSettings", args: ["@ext:dgemma-lsp.dgemma"] },
  ];
  const choice = await vscode.window.showQuickPick(items, { title: "DiffusionGemma" });
  if (choice) {
    await vscode.commands.executeCommand(choice.command, ...(choice.args ?? []));
  }
}

async function rewriteBlock(
  server: ServerManager,
  preview: EditPreview,
  log: vscode.LogOutputChannel,
  uri?: vscode.Uri,
  range?: vscode.Range,
): Promise<void> {
  const editor =
    uri === undefined
      ? vscode.window.activeTextEditor
      : vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString());
  if (!editor) {
    return;
  }
  const document = editor.document;
  const where = range ?? editor.selection;
  try {
    const edit = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: "DiffusionGemma: rewriting" },
      () => server.requestRewrite(document, new vscode.Range(where.start, where.end)),
    );
    const edits = edit?.get(document.uri) ?? [];
    if (edits.length === 0) {
      void vscode.window.setStatusBarMessage("DiffusionGemma: no rewrite here", 3000);
      return;
    }
    if (document.version !== editor.document.version) {
      return; // typed on while the model worked
    }
    await preview.showRewrite(document, edits);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    log.warn(`rewrite: ${message}`);
    if (err instanceof UnsupportedError) {
      void vscode.window.showInformationMessage(`DiffusionGemma: ${message}.`);
    } else {
      void vscode.window.showErrorMessage(`DiffusionGemma: rewrite failed (${message}).`);
    }
  }
}

/** `dgemma/nextEdit`: on demand, or when typing pauses with `dgemma.nextEdit.auto`. */
class NextEdits implements vscode.Disposable {
  private unsupported = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private request: vscode.CancellationTokenSource | undefined;
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly server: ServerManager,
    private readonly preview: EditPreview,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.subscription = vscode.workspace.onDidChangeTextDocument((event) => {
      if (
        event.contentChanges.length === 0 ||
        event.document !== vscode.window.activeTextEditor?.document ||
        !settings().get<boolean>("nextEdit.auto", false) ||
        this.unsupported
      ) {
        return;
      }
      clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.suggest(false), 750);
    });
  }

  async suggest(invoked: boolean): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const client: LanguageClient | undefined = this.server.running;
    if (!editor || !client) {
      return;
    }
    if (this.unsupported) {
      if (invoked) {
        void vscode.window.showInformationMessage("DiffusionGemma: this dgemma-lsp has no next-edit suggestions yet.");
      }
      return;
    }
    this.request?.cancel();
    const source = new vscode.CancellationTokenSource();
    this.request = source;
    const document = editor.document;
    const version = document.version;
    try {
      const answer: unknown = await client.sendRequest(
        NEXT_EDIT_REQUEST,
        {
          textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri) },
          position: client.code2ProtocolConverter.asPosition(editor.selection.active),
        },
        source.token,
      );
      if (source.token.isCancellationRequested || document.version !== version) {
        return;
      }
      if (!isNextEdit(answer)) {
        if (invoked) {
          void vscode.window.setStatusBarMessage("DiffusionGemma: no next edit here", 3000);
        }
        return;
      }
      const range = client.protocol2CodeConverter.asRange(answer.range);
      await this.preview.showNextEdit(editor, new vscode.TextEdit(range, answer.newText));
    } catch (err) {
      if (err instanceof ResponseError && err.code === METHOD_NOT_FOUND) {
        this.unsupported = true;
        this.log.info("the server has no dgemma/nextEdit: next-edit suggestions are off");
        if (invoked) {
          void vscode.window.showInformationMessage(
            "DiffusionGemma: this dgemma-lsp has no next-edit suggestions yet.",
          );
        }
        return;
      }
      if (!source.token.isCancellationRequested) {
        this.log.warn(`next edit: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.request?.cancel();
    this.subscription.dispose();
  }
}
