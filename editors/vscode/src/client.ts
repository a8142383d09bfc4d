import * as readline from "node:readline";
import * as vscode from "vscode";
import {
  type CodeActionParams,
  CodeActionRequest,
  type Executable,
  LanguageClient,
  type LanguageClientOptions,
  type Middleware,
  RevealOutputChannelOn,
  State,
  type StaticFeature,
} from "vscode-languageclient/node";
import { notFoundMessage, resolveCommand } from "./command";
import { Freshness } from "./freshness";
import { parseLogLine } from "./logLevels";
import { Partials } from "./partials";
import { PartialView } from "./partialView";
import {
  EXPERIMENTAL_CAPABILITIES,
  isResolvingParams,
  isServerStatus,
  RESOLVING_NOTIFICATION,
  REWRITE_KIND,
  STATUS_NOTIFICATION,
} from "./protocol";
import { languageEnabled, serverOptions } from "./settings";
import type { StatusBar } from "./status";

export const SECTION = "dgemma";

export function settings(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(SECTION);
}

export function currentServerOptions() {
  const config = settings();
  return serverOptions((key) => config.get(key));
}

/** Declares the custom notifications this extension handles (the server sends them only then). */
const customNotifications: StaticFeature = {
  fillClientCapabilities(capabilities) {
    const declared = (capabilities.experimental ?? {}) as Record<string, unknown>;
    capabilities.experimental = { ...declared, ...EXPERIMENTAL_CAPABILITIES };
  },
  initialize() {},
  getState: () => ({ kind: "static" }),
  clear() {},
};

/** The context key under which Tab types a Tab while the suggestion shown is too new to have been read. */
export const FRESH_KEY = "dgemma.suggestionFresh";

/** Opens the settings editor at `key` (under `dgemma.`) on the tab where its value lives. */
export async function openSetting(key: string): Promise<void> {
  const id = `${SECTION}.${key}`;
  const where = settings().inspect(key);
  if (where?.workspaceFolderValue !== undefined || where?.workspaceValue !== undefined) {
    await vscode.commands.executeCommand("workbench.action.openWorkspaceSettings", { query: id });
    return;
  }
  if (vscode.env.remoteName !== undefined) {
    // In a remote window (code-server, SSH) a machine-overridable setting is shown under Remote: the User
    // tab says "No Settings Found".
    try {
      await vscode.commands.executeCommand("workbench.action.openRemoteSettings", { query: id });
      return;
    } catch {
      // no Remote tab in this window after all
    }
  }
  await vscode.commands.executeCommand("workbench.action.openSettings", id);
}

/** What the line at `position` would read with the first item of an inline completion answer. */
function lineWithSuggestion(
  document: vscode.TextDocument,
  position: vscode.Position,
  answer: vscode.InlineCompletionItem[] | vscode.InlineCompletionList | null | undefined,
): string | undefined {
  const item = Array.isArray(answer) ? answer[0] : answer?.items[0];
  if (!item) {
    return undefined;
  }
  const text = typeof item.insertText === "string" ? item.insertText : item.insertText.value;
  const start = item.range?.start ?? position;
  return `${document.uri.toString()}\n${start.line}\n${document.lineAt(start.line).text.slice(0, start.character)}${text}`;
}

function workspacePaths(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file").map((f) => f.uri.fsPath);
}

/**
 * Owns the language client: start, stop and restart, one at a time. Restarts asked for while one is
 * running are folded into a single following restart.
 */
export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private queue: Promise<void> = Promise.resolve();
  private restartQueued = false;
  private readonly subscriptions: vscode.Disposable[] = [];
  private ready = false; // the last dgemma/status said the model is ready
  private askingOnReady = false; // the trigger command running is the extension's, not the user's key
  private readonly freshness = new Freshness(
    (fresh) => void vscode.commands.executeCommand("setContext", FRESH_KEY, fresh),
    () => settings().get<number>("inline.acceptAfterMs", 300),
  );
  private readonly partialView = new PartialView();
  // The slow completion's partial (dgemma/resolving) of the request in flight, drawn by partialView.
  private readonly partials = new Partials((shown) => this.partialView.draw(shown));
  private readonly watchers: vscode.Disposable[];

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly statusBar: StatusBar,
  ) {
    this.watchers = [
      vscode.workspace.onDidChangeTextDocument((event) => {
        this.partials.edited(event.document.uri.toString(), event.document.version);
      }),
      vscode.window.onDidChangeTextEditorSelection((event) => {
        const at = event.selections[0]?.active;
        if (at !== undefined) {
          this.partials.moved(event.textEditor.document.uri.toString(), at);
        }
      }),
      vscode.window.onDidChangeActiveTextEditor(() => this.partials.drop()),
    ];
  }

  get running(): LanguageClient | undefined {
    return this.client?.state === State.Running ? this.client : undefined;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  restart(): Promise<void> {
    if (this.restartQueued) {
      return this.queue;
    }
    this.restartQueued = true;
    return this.enqueue(async () => {
      this.restartQueued = false;
      await this.doStop();
      await this.doStart();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(step).catch((err: unknown) => {
      this.log.error(`server lifecycle: ${err instanceof Error ? err.message : String(err)}`);
    });
    return this.queue;
  }

  private async doStart(): Promise<void> {
    const config = settings();
    const setting = config.get<string>("server.path", "dgemma-lsp");
    const resolved = resolveCommand({ setting, pathEnv: process.env.PATH, workspaceFolders: workspacePaths() });
    if (resolved.command === undefined) {
      this.statusBar.setPhase("notFound");
      this.log.error(`${notFoundMessage(setting)} Looked in: ${resolved.searched.join(", ")}`);
      void vscode.window.showErrorMessage(notFoundMessage(setting), "Open Settings", "Show Log").then((choice) => {
        if (choice === "Open Settings") {
          void openSetting("server.path");
        } else if (choice === "Show Log") {
          this.log.show();
        }
      });
      return;
    }
    const args = ["--stdio", ...config.get<string[]>("server.args", []).filter((a) => typeof a === "string")];
    const executable: Executable = { command: resolved.command, args, options: { env: process.env } };
    this.log.info(`starting ${resolved.command} ${args.join(" ")}`);
    this.statusBar.setPhase("starting");
    const client = new LanguageClient("dgemma", "DiffusionGemma", executable, this.clientOptions());
    client.registerFeature(customNotifications);
    this.client = client;
    this.subscriptions.push(
      client.onNotification(STATUS_NOTIFICATION, (params: unknown) => {
        if (isServerStatus(params)) {
          this.statusBar.setStatus(params);
          const becameReady = params.state === "ready" && !this.ready;
          this.ready = params.state === "ready";
          if (becameReady && vscode.window.activeTextEditor && settings().get("completion.trigger") !== "manual") {
            void this.askAgain();
          }
        }
      }),
      client.onNotification(RESOLVING_NOTIFICATION, (params: unknown) => {
        if (isResolvingParams(params)) {
          this.partials.resolving(params);
        }
      }),
      client.onDidChangeState((event) => {
        if (event.newState === State.Stopped && this.client === client) {
          this.statusBar.setPhase("stopped");
        }
      }),
    );
    try {
      await client.start();
      this.statusBar.setPhase("running");
    } catch (err) {
      this.statusBar.setPhase("stopped");
      const message = err instanceof Error ? err.message : String(err);
      this.log.error(`the server did not start: ${message}`);
      void vscode.window
        .showErrorMessage(`DiffusionGemma: the server did not start (${message}).`, "Show Log")
        .then((choice) => choice && this.log.show());
    }
  }

  /**
   * What was typed while the model loaded got no suggestion: ask again at the cursor. VS Code's only
   * command that asks is its trigger key's (Invoked), which the server answers whatever its eagerness:
   * the middleware sends this one as typing would (Automatic). The command resolves once answered.
   */
  private async askAgain(): Promise<void> {
    this.askingOnReady = true;
    try {
      await vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
    } finally {
      this.askingOnReady = false;
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.ready = false;
    for (const s of this.subscriptions.splice(0)) {
      s.dispose();
    }
    if (client === undefined) {
      return;
    }
    try {
      if (client.state !== State.Stopped) {
        await client.stop(3000);
      }
    } catch (err) {
      this.log.warn(`stopping the server: ${err instanceof Error ? err.message : String(err)}`);
    }
    await client.dispose().catch(() => undefined);
  }

  /** Sends the server options after a settings change (no restart needed). */
  async sendSettings(): Promise<void> {
    const client = this.running;
    if (client) {
      await client.sendNotification("workspace/didChangeConfiguration", {
        settings: { [SECTION]: currentServerOptions() },
      });
    }
  }

  /** Asks the server for its block-rewrite code action at `range`; undefined when it has none. */
  async requestRewrite(document: vscode.TextDocument, range: vscode.Range): Promise<vscode.WorkspaceEdit | undefined> {
    const client = this.running;
    if (!client) {
      throw new Error("the server is not running");
    }
    if (!supportsRewrite(client)) {
      throw new UnsupportedError("this dgemma-lsp has no block rewrite yet (no refactor.rewrite code action)");
    }
    const params: CodeActionParams = {
      textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri) },
      range: client.code2ProtocolConverter.asRange(range),
      context: { diagnostics: [], only: [REWRITE_KIND], triggerKind: 1 },
    };
    const answer = await client.sendRequest(CodeActionRequest.type, params);
    for (const entry of answer ?? []) {
      if (!("kind" in entry) || typeof entry.kind !== "string" || !entry.kind.startsWith(REWRITE_KIND)) {
        continue;
      }
      let action = entry;
      if (action.edit === undefined && action.data !== undefined && resolvesCodeActions(client)) {
        action = await client.sendRequest("codeAction/resolve", action);
      }
      if (action.edit) {
        return client.protocol2CodeConverter.asWorkspaceEdit(action.edit);
      }
    }
    return undefined;
  }

  private clientOptions(): LanguageClientOptions {
    return {
      documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
      outputChannel: this.log,
      traceOutputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: currentServerOptions(),
      middleware: this.middleware(),
      stdioOptions: {
        stdout: () => undefined, // the LSP transport in stdio mode
        stderr: (input, channel) => {
          readline
            .createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY, terminal: false })
            .on("line", (line) => {
              const { level, message } = parseLogLine(line);
              channel[level](`[server] ${message}`);
            });
        },
      },
    };
  }

  private middleware(): Middleware {
    const previews = new WeakSet<vscode.CodeAction>(); // the actions made here
    return {
      provideInlineCompletionItems: async (document, position, context, token, next) => {
        const config = settings();
        if (!config.get<boolean>("enable", true)) {
          return null;
        }
        if (!languageEnabled(config.get<string[]>("completion.languages", []), document.languageId)) {
          return null;
        }
        const asked =
          this.askingOnReady && context.triggerKind === vscode.InlineCompletionTriggerKind.Invoke
            ? { ...context, triggerKind: vscode.InlineCompletionTriggerKind.Automatic }
            : context;
        const ticket = this.partials.ask({
          uri: document.uri.toString(),
          version: document.version,
          position: { line: position.line, character: position.character },
        });
        let answer: Awaited<ReturnType<typeof next>>;
        try {
          answer = await next(document, position, asked, token);
        } finally {
          this.partials.answered(ticket); // the final suggestion replaces the partial
        }
        if (!token.isCancellationRequested) {
          this.freshness.answered(lineWithSuggestion(document, position, answer));
        }
        return answer;
      },
      // The server's rewrite action carries its edit; applied from the light bulb it would change the
      // file at once. Route it through the preview instead: the user sees the diff and accepts it.
      provideCodeActions: async (document, range, context, token, next) => {
        const actions = await next(document, range, context, token);
        return actions?.map((action) => {
          if (
            !(action instanceof vscode.CodeAction) ||
            !action.kind ||
            !vscode.CodeActionKind.RefactorRewrite.contains(action.kind)
          ) {
            return action;
          }
          const preview = new vscode.CodeAction(`${action.title} (preview)`, action.kind);
          preview.command = {
            command: "dgemma.rewriteBlock",
            title: action.title,
            arguments: [document.uri, range],
          };
          previews.add(preview);
          return preview;
        });
      },
      // VS Code asks to resolve every action it shows: the preview is complete as it is (its command
      // asks the server for the edit), and the server has nothing to resolve it with (it has no data).
      resolveCodeAction: (action, token, next) => (previews.has(action) ? action : next(action, token)),
    };
  }

  dispose(): void {
    this.freshness.dispose();
    for (const watcher of this.watchers) {
      watcher.dispose();
    }
    this.partialView.dispose();
    void this.stop();
  }
}

export class UnsupportedError extends Error {}

function supportsRewrite(client: LanguageClient): boolean {
  const provider = client.initializeResult?.capabilities.codeActionProvider;
  if (!provider) {
    return false;
  }
  if (provider === true) {
    return true;
  }
  const kinds = provider.codeActionKinds;
  return kinds === undefined || kinds.some((kind) => kind === "refactor" || kind.startsWith(REWRITE_KIND));
}

function resolvesCodeActions(client: LanguageClient): boolean {
  const provider = client.initializeResult?.capabilities.codeActionProvider;
  return typeof provider === "object" && provider.resolveProvider === true;
}
