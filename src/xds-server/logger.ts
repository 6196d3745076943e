// The server logs through this, so the CLI can route logs and tests can assert on them.

export type LogFields = Readonly<Record<string, string | number | boolean | undefined>>;

export interface XdsLogger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

function line(level: string, message: string, fields?: LogFields): string {
  const rest = fields
    ? Object.entries(fields)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => ` ${k}=${JSON.stringify(v)}`)
        .join("")
    : "";
  return `xds ${level}: ${message}${rest}`;
}

/** Warnings and errors to stderr; debug and info are dropped. */
export const stderrLogger: XdsLogger = {
  debug() {},
  info() {},
  warn: (message, fields) => console.error(line("warn", message, fields)),
  error: (message, fields) => console.error(line("error", message, fields)),
};
