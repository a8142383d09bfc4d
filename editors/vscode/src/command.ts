// Finding the server command. Node only (fs, path): unit-tested without VS Code.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export interface CommandLookup {
  /** The `dgemma.server.path` setting. */
  setting: string;
  /** PATH as the extension host sees it. */
  pathEnv: string | undefined;
  /** Workspace folders (file system paths), for `${workspaceFolder}` and a project `.venv`. */
  workspaceFolders: readonly string[];
  home?: string;
}

export interface ResolvedCommand {
  /** The executable to start, when found. */
  command: string | undefined;
  /** Where it was looked for, for the error message. */
  searched: string[];
}

function isExecutable(file: string): boolean {
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile()) {
      return false;
    }
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function expandSetting(setting: string, workspaceFolders: readonly string[], home: string): string {
  let value = setting.trim();
  if (value === "~" || value.startsWith("~/")) {
    value = path.join(home, value.slice(1));
  }
  const folder = workspaceFolders[0];
  if (folder !== undefined) {
    value = value.replaceAll("${workspaceFolder}", folder);
  }
  return value.replaceAll("${userHome}", home);
}

/**
 * The executable for `dgemma.server.path`: a path (absolute, or relative to the first workspace
 * folder) is used as it is; a bare name is looked up on PATH, then in the workspace's `.venv/bin`.
 */
export function resolveCommand(lookup: CommandLookup): ResolvedCommand {
  const home = lookup.home ?? os.homedir();
  const value = expandSetting(lookup.setting || "dgemma-lsp", lookup.workspaceFolders, home);
  const exe = process.platform === "win32" ? [".exe", ".cmd", ""] : [""];
  if (value.includes("/") || value.includes(path.sep)) {
    const base = lookup.workspaceFolders[0] ?? process.cwd();
    const file = path.resolve(base, value);
    return { command: isExecutable(file) ? file : undefined, searched: [file] };
  }
  const dirs = (lookup.pathEnv ?? "").split(path.delimiter).filter((d) => d !== "");
  for (const folder of lookup.workspaceFolders) {
    dirs.push(path.join(folder, ".venv", process.platform === "win32" ? "Scripts" : "bin"));
  }
  const searched: string[] = [];
  for (const dir of dirs) {
    for (const suffix of exe) {
      const file = path.join(dir, value + suffix);
      searched.push(file);
      if (isExecutable(file)) {
        return { command: file, searched };
      }
    }
  }
  return { command: undefined, searched };
}

export function notFoundMessage(setting: string): string {
  return (
    `DiffusionGemma: the language server command "${setting || "dgemma-lsp"}" was not found. ` +
    "Install it in a Python environment (pip install dgemma-lsp, or pip install -e . in a checkout of " +
    'dgemma-lsp) and set "dgemma.server.path" to the full path of its dgemma-lsp command ' +
    "(for example /home/me/dgemma-lsp/.venv/bin/dgemma-lsp), or put that folder on PATH."
  );
}
