// Settings -> the server's options (dgemma_lsp/options.py). No `vscode` import: unit-tested in node.

/** Reads one setting under `dgemma.` (VS Code's WorkspaceConfiguration.get, or a plain map in tests). */
export type SettingReader = (key: string) => unknown;

/** Settings sent to the server; the others (enable, server.*, nextEdit.*, trace.*) only the extension reads. */
export const SERVER_SETTINGS = ["model", "device", "threads", "context", "completion", "debugLog"] as const;
/** Settings whose change needs a new server process. */
export const RESTART_SETTINGS = ["server.path", "server.args"] as const;

export const EAGERNESS = ["quiet", "balanced", "eager"] as const;
export const TRIGGERS = ["automatic", "manual"] as const;

export interface ServerOptions {
  model: string;
  device: string;
  threads: number;
  context: { prefixTokens: number; suffixTokens: number };
  completion: {
    /** Absent: the server picks by device (250 ms on CPU, 150 on a GPU). */
    latencyBudgetMs?: number;
    maxTokensSingleLine: number;
    maxTokensMultiLine: number;
    candidates: number;
    maxSteps: number;
    languages: string[];
    /** How readily a suggestion is shown while typing (the server's show-or-not decision). */
    eagerness: (typeof EAGERNESS)[number];
    /** "manual": only requests the user asked for (`editor.action.inlineSuggest.trigger`) are answered. */
    trigger: (typeof TRIGGERS)[number];
  };
  debugLog: boolean;
}

export const DEFAULT_SERVER_OPTIONS: ServerOptions = {
  model: "default",
  device: "auto",
  threads: 0,
  context: { prefixTokens: 768, suffixTokens: 256 },
  completion: {
    maxTokensSingleLine: 32,
    maxTokensMultiLine: 96,
    candidates: 1,
    maxSteps: 0,
    languages: [],
    eagerness: "balanced",
    trigger: "automatic",
  },
  debugLog: false,
};

function text(read: SettingReader, key: string, fallback: string): string {
  const value = read(key);
  return typeof value === "string" && value.trim() !== "" ? value.trim() : fallback;
}

function count(read: SettingReader, key: string, fallback: number, least: number): number {
  const value = read(key);
  return typeof value === "number" && Number.isInteger(value) && value >= least ? value : fallback;
}

/** `{[name]: value}` when the setting holds a whole number of at least `least`, else `{}` (unset). */
function optionalCount(read: SettingReader, key: string, name: string, least: number): Record<string, number> {
  const value = read(key);
  return typeof value === "number" && Number.isInteger(value) && value >= least ? { [name]: value } : {};
}

function oneOf<T extends string>(read: SettingReader, key: string, allowed: readonly T[], fallback: T): T {
  const value = read(key);
  return allowed.find((choice) => choice === value) ?? fallback;
}

function words(read: SettingReader, key: string): string[] {
  const value = read(key);
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string" && v !== "") : [];
}

/**
 * The options object the server receives as `initializationOptions` and in
 * `workspace/didChangeConfiguration` (under `dgemma`). Values VS Code's schema would flag are replaced
 * by the defaults here, so the server is never sent a value it must refuse.
 */
export function serverOptions(read: SettingReader): ServerOptions {
  const d = DEFAULT_SERVER_OPTIONS;
  return {
    model: text(read, "model", d.model),
    device: text(read, "device", d.device),
    threads: count(read, "threads", d.threads, 0),
    context: {
      prefixTokens: count(read, "context.prefixTokens", d.context.prefixTokens, 1),
      suffixTokens: count(read, "context.suffixTokens", d.context.suffixTokens, 1),
    },
    completion: {
      ...optionalCount(read, "completion.latencyBudgetMs", "latencyBudgetMs", 0),
      maxTokensSingleLine: count(read, "completion.maxTokensSingleLine", d.completion.maxTokensSingleLine, 1),
      maxTokensMultiLine: count(read, "completion.maxTokensMultiLine", d.completion.maxTokensMultiLine, 1),
      candidates: count(read, "completion.candidates", d.completion.candidates, 1),
      maxSteps: count(read, "completion.maxSteps", d.completion.maxSteps, 0),
      languages: words(read, "completion.languages"),
      eagerness: oneOf(read, "completion.eagerness", EAGERNESS, d.completion.eagerness),
      trigger: oneOf(read, "completion.trigger", TRIGGERS, d.completion.trigger),
    },
    debugLog: read("debugLog") === true,
  };
}

/** Whether a language is enabled by `dgemma.completion.languages` (empty: all; the server then keeps to
 * the model's own languages). */
export function languageEnabled(languages: readonly string[], languageId: string): boolean {
  return languages.length === 0 || languages.includes(languageId);
}
