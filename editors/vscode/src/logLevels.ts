// The server logs `TIME LEVEL logger: message` lines on stderr (dgemma_lsp/cli.py); keep their level.

export type Level = "trace" | "debug" | "info" | "warn" | "error";

const LEVELS: Record<string, Level> = {
  DEBUG: "debug",
  INFO: "info",
  WARNING: "warn",
  ERROR: "error",
  CRITICAL: "error",
};

/** The level of one server log line, and the line without its timestamp and level. */
export function parseLogLine(line: string): { level: Level; message: string } {
  const match = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/.exec(line);
  if (match?.[1] === undefined || match[2] === undefined) {
    // Tracebacks and anything printed outside logging: an error is the safe reading.
    return { level: "error", message: line };
  }
  return { level: LEVELS[match[1]] ?? "info", message: match[2] };
}
