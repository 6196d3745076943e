// The server logs through this, so the CLI can route logs and tests can assert on them.

import { moduleLogger } from "../observability/log.js";

export type LogFields = Readonly<Record<string, string | number | boolean | undefined>>;

export interface XdsLogger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/** The `xds` module's logger (src/observability/log.ts): its level is `--log-level xds=<level>`. */
export function xdsLogger(): XdsLogger {
  const l = moduleLogger("xds");
  return {
    debug: (message, fields) => {
      if (l.isLevelEnabled("debug")) l.debug(fields ?? {}, `xds: ${message}`);
    },
    info: (message, fields) => l.info(fields ?? {}, `xds: ${message}`),
    warn: (message, fields) => l.warn(fields ?? {}, `xds warning: ${message}`),
    error: (message, fields) => l.error(fields ?? {}, `xds error: ${message}`),
  };
}

/** The default logger of an XdsServer: the `xds` module's, at its level. */
export const stderrLogger: XdsLogger = {
  debug: (message, fields) => xdsLogger().debug(message, fields),
  info: (message, fields) => xdsLogger().info(message, fields),
  warn: (message, fields) => xdsLogger().warn(message, fields),
  error: (message, fields) => xdsLogger().error(message, fields),
};
