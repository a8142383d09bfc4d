// When the keys may take an inline suggestion. No `vscode` import: unit-tested in node.

/**
 * A suggestion is taken only once it has been on the screen long enough to be read: a Tab pressed
 * sooner (a second quick Tab after an accept, when the next suggestion comes at once) was typed before
 * anyone could see what appeared, so it does what Tab does. `setFresh(true)` while a new suggestion is
 * younger than the delay (the keybinding that makes Tab a Tab reads it); the same suggestion answered
 * again (typed through, asked again) is not new.
 */
/** Runs `run` after `ms`; returns what cancels it. */
export type Later = (run: () => void, ms: number) => () => void;

const timeout: Later = (run, ms) => {
  const timer = setTimeout(run, ms);
  return () => clearTimeout(timer);
};

export class Freshness {
  private shown: string | undefined;
  private cancel: (() => void) | undefined;

  constructor(
    private readonly setFresh: (fresh: boolean) => void,
    private readonly delayMs: () => number,
    private readonly later: Later = timeout,
  ) {}

  /** An answer of the provider: `shown` is what the line would read with its first item, or undefined. */
  answered(shown: string | undefined): void {
    const isNew = shown !== undefined && shown !== this.shown;
    this.shown = shown;
    if (!isNew) {
      return;
    }
    this.cancel?.();
    const delay = this.delayMs();
    if (delay <= 0) {
      return;
    }
    this.setFresh(true);
    this.cancel = this.later(() => this.setFresh(false), delay);
  }

  dispose(): void {
    this.cancel?.();
  }
}
