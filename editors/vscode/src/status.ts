import * as vscode from "vscode";
import type { ServerStatus } from "./protocol";
import { type ClientPhase, describeStatus } from "./statusText";

/** The status bar item: model, device and last latency from `dgemma/status`; a click opens the menu. */
export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private phase: ClientPhase = "starting";
  private status: ServerStatus | undefined;
  private enabled = true;

  constructor() {
    this.item = vscode.window.createStatusBarItem("dgemma.status", vscode.StatusBarAlignment.Right, 100);
    this.item.name = "DiffusionGemma";
    this.item.command = "dgemma.showMenu";
    this.render();
    this.item.show();
  }

  setPhase(phase: ClientPhase): void {
    this.phase = phase;
    if (phase !== "running") {
      this.status = undefined;
    }
    this.render();
  }

  setStatus(status: ServerStatus): void {
    this.phase = "running";
    this.status = status;
    this.render();
  }

  setEnabled(enabled: boolean): void {
    this.enabled = enabled;
    this.render();
  }

  private render(): void {
    const view = describeStatus(this.phase, this.enabled, this.status);
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.backgroundColor = view.error ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}
