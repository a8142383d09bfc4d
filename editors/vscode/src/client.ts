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
import { parseLogLine } from "./logLevels";
import { EXPERIMENTAL_CAPABILITIES, isServerStatus, REWRITE_KIND, STATUS_NOTIFICATION } from "./protocol";
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

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly statusBar: StatusBar,
  ) {}

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
          void vscode.commands.executeCommand("workbench.action.openSettings", "dgemma.server.path");
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

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
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
    return {
      provideInlineCompletionItems: (document, position, context, token, next) => {
        const config = settings();
        if (!config.get<boolean>("enable", true)) {
          return null;
        }
        if (!languageEnabled(config.get<string[]>("completion.languages", []), document.languageId)) {
          return null;
        }
        return next(document, position, context, token);
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
          return preview;
        });
      },
    };
  }

  dispose(): void {
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
