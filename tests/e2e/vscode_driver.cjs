// Drives VS Code (code-server in headless Chromium) like a user, for tests/e2e/test_vscode.py.
//
//   node vscode_driver.cjs SCENARIO.json
//
// The scenario names the code-server URL, the file to open, where to type and what, and which steps
// to run; the driver prints one JSON line with what it saw (ghost text, status bar, errors) and saves
// screenshots. The assertions live in the pytest file; this only acts and observes.
"use strict";

const fs = require("node:fs");
const path = require("node:path");

const scenario = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const { chromium } = require(scenario.playwright);

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const seen = { steps: [], screenshots: [] };

function note(step, detail = {}) {
  seen.steps.push({ step, at: Date.now(), ...detail });
}

async function shot(page, name) {
  const file = path.join(scenario.artifacts, `${name}.png`);
  await page.screenshot({ path: file });
  seen.screenshots.push(file);
}

async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10000 });
  await input.fill(`>${title}`);
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
  await row.waitFor({ state: "visible", timeout: 10000 });
  await page.keyboard.press("Enter");
  note("command", { title });
}

async function openFile(page, name) {
  await page.keyboard.press("Control+P");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10000 });
  await input.fill(name);
  await page.locator(".quick-input-list .monaco-list-row").first().waitFor({ state: "visible", timeout: 15000 });
  await page.keyboard.press("Enter");
  await page.locator(`.tab.active[aria-label*="${name}"]`).first().waitFor({ timeout: 15000 });
  await page.locator(".editor-instance .monaco-editor textarea").first().waitFor({ state: "attached", timeout: 15000 });
  note("opened", { name });
}

async function goTo(page, line, column) {
  await page.keyboard.press("Control+G");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10000 });
  await input.fill(`:${line}:${column}`);
  await page.keyboard.press("Enter");
  await input.waitFor({ state: "hidden", timeout: 10000 });
  note("goto", { line, column });
}

async function statusText(page) {
  const item = page.locator(".statusbar-item", { hasText: "DGemma" }).first();
  return (await item.count()) > 0 ? (await item.innerText()).trim() : null;
}

async function waitForStatus(page, pattern, timeout) {
  const deadline = Date.now() + timeout;
  let text = null;
  while (Date.now() < deadline) {
    text = await statusText(page);
    if (text !== null && new RegExp(pattern).test(text)) {
      return text;
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`status bar never matched ${pattern}; last: ${text}`);
}

async function ghostText(page) {
  // The first line is inline (.ghost-text-decoration), further lines are view zones (.ghost-text).
  return page.evaluate(() => {
    const first = Array.from(document.querySelectorAll(".monaco-editor .ghost-text-decoration"))
      .map((n) => n.textContent)
      .join("");
    const more = Array.from(document.querySelectorAll(".monaco-editor .ghost-text .view-line")).map(
      (n) => n.textContent,
    );
    return { first, more };
  });
}

// In the page: records, at every frame, what the editor draws at the cursor: the pieces of the
// extension's partial (its decoration's `before` and `after` text: VS Code's "ced-" classes, the text
// in their ::before and ::after content, in the order drawn) and the ghost text, keeping the frames
// where either changed: [{at, partial, ghost}].
function installRecorder() {
  const pieces = () => {
    const found = [];
    for (const node of document.querySelectorAll(".editor-instance .monaco-editor .view-lines span[class*='ced-']")) {
      for (const pseudo of ["::before", "::after"]) {
        const style = getComputedStyle(node, pseudo);
        if (style.content && style.content !== "none" && style.content !== "normal") {
          let text = style.content;
          try {
            text = JSON.parse(text);
          } catch {
            text = text.slice(1, -1);
          }
          found.push({ text, color: style.color });
        }
      }
    }
    return found;
  };
  const ghost = () =>
    Array.from(document.querySelectorAll(".monaco-editor .ghost-text-decoration"))
      .map((n) => n.textContent)
      .join("");
  window.__frames = [];
  let last = "";
  const look = () => {
    const frame = { at: Date.now(), partial: pieces(), ghost: ghost() };
    const key = JSON.stringify([frame.partial, frame.ghost]);
    if (key !== last) {
      last = key;
      window.__frames.push(frame);
    }
    requestAnimationFrame(() => setTimeout(look, 0)); // after the frame's rendering: what was painted
  };
  look();
}

// The time (ms since the epoch) of a line of the extension's log: "2026-12-07 22:00:00.123 [trace] ...".
function loggedAt(entry) {
  const stamp = entry.match(/^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d\.\d+)/);
  return stamp ? new Date(`${stamp[1]}T${stamp[2]}`).getTime() : null;
}

// The inline completion requests and the dgemma/resolving and dgemma/confidence notifications of the
// trace, in order: [{kind: "request" | "response" | "resolving" | "confidence", at, id?, params?}].
function lspEvents(log) {
  const events = [];
  for (const entry of log.split(/\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[\w+\] )/)) {
    const at = loggedAt(entry);
    const params = entry.indexOf("Params: ");
    const request = entry.match(/Sending request 'textDocument\/inlineCompletion - \((\d+)\)'/);
    if (request && params >= 0) {
      events.push({ kind: "request", at, id: request[1], params: JSON.parse(entry.slice(params + 8)) });
    }
    const response = entry.match(/Received response 'textDocument\/inlineCompletion - \((\d+)\)'/);
    if (response) {
      const result = entry.indexOf("Result: ");
      events.push({ kind: "response", at, id: response[1], result: result >= 0 ? JSON.parse(entry.slice(result + 8)) : null });
    }
    const notification = entry.match(/Received notification 'dgemma\/(resolving|confidence)'/);
    if (notification && params >= 0) {
      events.push({ kind: notification[1], at, params: JSON.parse(entry.slice(params + 8)) });
    }
  }
  return events;
}

async function frames(page) {
  return page.evaluate(() => window.__frames);
}

async function waitFrames(page, what, test, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const all = await frames(page);
    if (test(all)) {
      return all;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}; frames: ${JSON.stringify(all).slice(-2000)}`);
    }
    await page.waitForTimeout(20);
  }
}

// The extension's log (its LSP trace: "dgemma.trace.server": "verbose" in the scenario's settings) of
// this window: the newest DiffusionGemma log under the scenario's logs folder.
function extensionLog() {
  const found = [];
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(full);
      } else if (entry.name.includes("DiffusionGemma") && entry.name.endsWith(".log")) {
        found.push({ full, mtime: fs.statSync(full).mtimeMs });
      }
    }
  };
  if (fs.existsSync(scenario.logs)) {
    walk(scenario.logs);
  }
  found.sort((a, b) => b.mtime - a.mtime);
  return found.length > 0 && found[0].mtime >= started ? fs.readFileSync(found[0].full, "utf8") : "";
}

// The inline completion requests of the trace at `line`:`character` asked with `triggerKind` (1: the
// user's key, 2: typing), and the number of items of each one answered: [{id, items}] (items null
// while unanswered).
function inlineAnswers(log, line, character, triggerKind) {
  const entries = log.split(/\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[\w+\] )/); // one per line logged
  const asked = new Map();
  for (const entry of entries) {
    const request = entry.match(/Sending request 'textDocument\/inlineCompletion - \((\d+)\)'/);
    const params = entry.indexOf("Params: ");
    if (request && params >= 0) {
      const sent = JSON.parse(entry.slice(params + "Params: ".length));
      if (
        sent.position.line === line &&
        sent.position.character === character &&
        sent.context.triggerKind === triggerKind
      ) {
        asked.set(request[1], null);
      }
    }
    const response = entry.match(/Received response 'textDocument\/inlineCompletion - \((\d+)\)'/);
    const result = entry.indexOf("Result: ");
    if (response && asked.has(response[1])) {
      const answer = result >= 0 ? JSON.parse(entry.slice(result + "Result: ".length)) : null;
      asked.set(response[1], Array.isArray(answer) ? answer.length : (answer?.items ?? []).length);
    }
  }
  return Array.from(asked, ([id, items]) => ({ id, items }));
}

const started = Date.now();
let writtenAt = 0; // the length of the extension's log when the last writeFile step ran

// The extension's log, or (`since` "ready") its part from the first dgemma/status saying the model is
// ready after the last writeFile step (the file a slow-loading model waits for).
function logSince(since) {
  const log = extensionLog();
  if (since !== "ready") {
    return log;
  }
  const ready = /Received notification 'dgemma\/status'\.\nParams: \{[^}]*"state": "ready"/g;
  ready.lastIndex = writtenAt;
  const found = ready.exec(log);
  return found ? log.slice(found.index) : "";
}

async function main() {
  fs.mkdirSync(scenario.artifacts, { recursive: true });
  const context = await chromium.launchPersistentContext(scenario.profile, {
    executablePath: scenario.chromium,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 720 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(30000);
  try {
    await page.goto(scenario.url, { waitUntil: "domcontentloaded" });
    await page.locator(".monaco-workbench").waitFor({ timeout: 60000 });
    note("workbench");
    seen.statusLoading = await waitForStatus(page, "DGemma", 60000);
    seen.statusReady = await waitForStatus(page, scenario.readyPattern, 90000);
    note("ready", { status: seen.statusReady });
    await openFile(page, scenario.file);
    await goTo(page, scenario.line, scenario.column);
    for (const step of scenario.steps) {
      await runStep(page, step);
    }
  } catch (err) {
    seen.error = String(err && err.stack ? err.stack : err);
    await shot(page, `${scenario.name}-failure`).catch(() => undefined);
  } finally {
    await context.close();
  }
  process.stdout.write(`${JSON.stringify(seen)}\n`);
}

async function runStep(page, step) {
  switch (step.do) {
    case "type":
      await page.keyboard.type(step.text, { delay: step.delay ?? 30 });
      note("typed", { text: step.text });
      return;
    case "press":
      await page.keyboard.press(step.key);
      note("pressed", { key: step.key });
      return;
    case "waitGhost": {
      await page.locator(".monaco-editor .ghost-text-decoration").first().waitFor({ state: "visible", timeout: step.timeout ?? 60000 });
      await page.waitForTimeout(300); // let the rest of a multi-line ghost text render
      seen.ghost = await ghostText(page);
      note("ghost", seen.ghost);
      return;
    }
    case "tabWhenGhost": {
      // A Tab the moment a (new) suggestion is drawn: a second quick Tab after an accept.
      await page.locator(".monaco-editor .ghost-text-decoration").first().waitFor({ state: "visible", timeout: step.timeout ?? 60000 });
      await page.keyboard.press("Tab");
      seen.second = await ghostText(page);
      note("tab at the ghost", seen.second);
      return;
    }
    case "writeFile": {
      // A FIFO blocks until its reader opens it; a plain file with the same text then takes its place,
      // for the reader's later reads (the reader holding the FIFO open still gets what follows).
      writtenAt = extensionLog().length;
      const fd = fs.openSync(step.path, "w");
      fs.writeFileSync(`${step.path}.plain`, step.text);
      fs.renameSync(`${step.path}.plain`, step.path);
      fs.writeSync(fd, step.text);
      fs.closeSync(fd);
      note("wrote", { path: step.path });
      return;
    }
    case "refactor": {
      // The Refactor menu (what the light bulb offers), and the action named `step.title` in it.
      // Asked again while the menu comes up without it (the actions of a file the server has just opened).
      const row = page.locator(".action-widget .monaco-list-row", { hasText: step.title }).first();
      for (let tries = 1; ; tries++) {
        await runCommand(page, "Refactor...");
        try {
          await row.waitFor({ state: "visible", timeout: 10000 });
          break;
        } catch (err) {
          if (tries === 3) {
            throw err;
          }
          await page.keyboard.press("Escape");
        }
      }
      for (let moves = 0; !(await row.evaluate((n) => n.classList.contains("focused"))); moves++) {
        if (moves > 20) {
          throw new Error(`no way to ${step.title} in the Refactor menu`);
        }
        await page.keyboard.press("ArrowDown");
      }
      await page.keyboard.press("Enter");
      note("refactor", { title: step.title });
      return;
    }
    case "clickNotification": {
      const button = page.locator(".notification-toast .monaco-button", { hasText: step.button }).first();
      await button.waitFor({ state: "visible", timeout: step.timeout ?? 30000 });
      seen.notification = (await page.locator(".notification-toast").first().innerText()).trim();
      await button.click();
      note("clicked", { button: step.button });
      return;
    }
    case "settingsEditor": {
      await page.locator(".settings-editor").first().waitFor({ state: "visible", timeout: 15000 });
      await page.locator(".settings-editor .setting-item, .settings-editor .no-results-message:visible").first().waitFor({ timeout: 15000 });
      await page.waitForTimeout(500); // the search filter settles
      seen.settings = await page.evaluate(() => {
        const visible = (n) => n && n.offsetParent !== null;
        const noResults = Array.from(document.querySelectorAll(".settings-editor .no-results-message")).some(visible);
        const items = Array.from(document.querySelectorAll(".settings-editor .setting-item .setting-item-label"))
          .filter(visible)
          .map((n) => n.textContent);
        const tab = Array.from(document.querySelectorAll(".settings-editor .settings-tabs-widget .action-label.checked")).map((n) => n.textContent);
        return { noResults, items, tab };
      });
      note("settings", seen.settings);
      return;
    }
    case "waitAnswer": {
      // The server's answer to an inline completion request at a position, as the trace logged it
      // (logged when it arrived: by then VS Code has it), then two frames drawn: what it shows is drawn.
      const deadline = Date.now() + (step.timeout ?? 60000);
      let answered = [];
      while (!answered.some((a) => a.items !== null)) {
        if (Date.now() > deadline) {
          throw new Error(`no answer to a request of kind ${step.triggerKind} at ${step.line}:${step.character}`);
        }
        await page.waitForTimeout(100);
        answered = inlineAnswers(logSince(step.since), step.line, step.character, step.triggerKind);
      }
      await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
      const answer = { triggerKind: step.triggerKind, items: answered.find((a) => a.items !== null).items };
      answer.ghost = await ghostText(page);
      seen.answers = [...(seen.answers ?? []), answer];
      note("answer", answer);
      return;
    }
    case "record":
      await page.evaluate(installRecorder);
      note("recording");
      return;
    case "waitPartial": {
      // A frame drawing a partial (in at least `pieces` pieces: 2 is a settled head and the rest), after
      // the last mark when there is one.
      const from = seen.mark ?? 0;
      const pieces = step.pieces ?? 1;
      await waitFrames(page, "a partial", (all) => all.some((f) => f.at >= from && f.partial.length >= pieces), step.timeout ?? 60000);
      note("partial");
      return;
    }
    case "waitNoPartial": {
      await waitFrames(page, "the partial gone", (all) => all.length > 0 && all.at(-1).partial.length === 0, step.timeout ?? 10000);
      note("partial gone");
      return;
    }
    case "mark":
      seen.mark = Date.now();
      note("mark");
      return;
    case "waitFrameGhost": {
      const from = seen.mark ?? 0;
      await waitFrames(page, "ghost text", (all) => all.some((f) => f.at >= from && f.ghost !== ""), step.timeout ?? 60000);
      note("frame ghost");
      return;
    }
    case "timeline":
      seen.frames = await frames(page);
      seen.lsp = lspEvents(extensionLog());
      note("timeline");
      return;
    case "waitNoGhost":
      await page.locator(".monaco-editor .ghost-text-decoration").first().waitFor({ state: "hidden", timeout: 10000 });
      note("ghost gone");
      return;
    case "screenshot":
      await shot(page, step.name);
      return;
    case "command":
      await runCommand(page, step.title);
      return;
    case "waitDiff":
      await page.locator(".monaco-diff-editor").first().waitFor({ state: "visible", timeout: step.timeout ?? 60000 });
      await page.waitForTimeout(500);
      seen.diffTitle = await page.locator(".tab.active").first().innerText();
      note("diff", { title: seen.diffTitle });
      return;
    case "waitNoDiff":
      await page.locator(".monaco-diff-editor").first().waitFor({ state: "hidden", timeout: 15000 });
      note("diff closed");
      return;
    case "save":
      await page.keyboard.press("Control+S");
      await page.waitForTimeout(step.wait ?? 1000);
      note("saved", { text: fs.readFileSync(scenario.path, "utf8") });
      return;
    case "status":
      seen.status = await waitForStatus(page, step.pattern, step.timeout ?? 30000);
      note("status", { text: seen.status });
      return;
    case "statusItem": {
      const item = page.locator(".statusbar-item", { hasText: step.text }).first();
      await item.waitFor({ state: "visible", timeout: step.timeout ?? 30000 });
      seen.statusItem = (await item.innerText()).trim();
      note("status item", { text: seen.statusItem });
      return;
    }
    case "noStatusItem":
      await page.locator(".statusbar-item", { hasText: step.text }).first().waitFor({ state: "hidden", timeout: 15000 });
      note("status item gone", { text: step.text });
      return;
    case "wait":
      await page.waitForTimeout(step.ms);
      return;
    default:
      throw new Error(`unknown step ${JSON.stringify(step)}`);
  }
}

main().catch((err) => {
  process.stdout.write(`${JSON.stringify({ ...seen, error: String(err) })}\n`);
  process.exitCode = 1;
});
