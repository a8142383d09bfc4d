import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { expandSetting, notFoundMessage, resolveCommand } from "../src/command";

function tempTree(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "dgemma-cmd-"));
  for (const dir of ["bin", "project/.venv/bin", "empty"]) {
    fs.mkdirSync(path.join(root, dir), { recursive: true });
  }
  fs.writeFileSync(path.join(root, "bin", "dgemma-lsp"), "#!/bin/sh\n", { mode: 0o755 });
  fs.writeFileSync(path.join(root, "project/.venv/bin", "dgemma-lsp"), "#!/bin/sh\n", { mode: 0o755 });
  fs.writeFileSync(path.join(root, "empty", "not-executable"), "", { mode: 0o644 });
  return root;
}

test("a bare name is found on PATH first", () => {
  const root = tempTree();
  const found = resolveCommand({
    setting: "dgemma-lsp",
    pathEnv: [path.join(root, "empty"), path.join(root, "bin")].join(path.delimiter),
    workspaceFolders: [path.join(root, "project")],
  });
  assert.equal(found.command, path.join(root, "bin", "dgemma-lsp"));
});

test("then in the workspace's .venv", () => {
  const root = tempTree();
  const found = resolveCommand({
    setting: "dgemma-lsp",
    pathEnv: path.join(root, "empty"),
    workspaceFolders: [path.join(root, "project")],
  });
  assert.equal(found.command, path.join(root, "project/.venv/bin/dgemma-lsp"));
});

test("a path is used as it is, and a missing or non-executable one is not found", () => {
  const root = tempTree();
  const ok = resolveCommand({ setting: path.join(root, "bin/dgemma-lsp"), pathEnv: "", workspaceFolders: [] });
  assert.equal(ok.command, path.join(root, "bin/dgemma-lsp"));
  const relative = resolveCommand({
    setting: "${workspaceFolder}/.venv/bin/dgemma-lsp",
    pathEnv: "",
    workspaceFolders: [path.join(root, "project")],
  });
  assert.equal(relative.command, path.join(root, "project/.venv/bin/dgemma-lsp"));
  const missing = resolveCommand({
    setting: path.join(root, "empty/not-executable"),
    pathEnv: "",
    workspaceFolders: [],
  });
  assert.equal(missing.command, undefined);
  assert.deepEqual(missing.searched, [path.join(root, "empty/not-executable")]);
});

test("nothing found: the message names the setting and the fix", () => {
  const root = tempTree();
  const found = resolveCommand({ setting: "dgemma-lsp", pathEnv: path.join(root, "empty"), workspaceFolders: [] });
  assert.equal(found.command, undefined);
  const message = notFoundMessage("dgemma-lsp");
  assert.match(message, /dgemma\.server\.path/);
  assert.match(message, /pip install/);
});

test("~ and ${userHome} expand to the home folder", () => {
  assert.equal(expandSetting("~/venv/bin/dgemma-lsp", [], "/home/me"), "/home/me/venv/bin/dgemma-lsp");
  assert.equal(expandSetting("${userHome}/x", [], "/home/me"), "/home/me/x");
});
