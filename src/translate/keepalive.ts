// TCP keepalive on Sluice's own sockets (to MCP targets, to remote guard services): what this Node.js can set, and
// setting it. Node.js 26 added the probe interval and count to `socket.setKeepAlive`; before, Node sets only the idle
// time and libuv fixes the interval at 1 s and the count at 10 (seen with strace on Node 22.23, libuv 1.51). The
// translators read KEEPALIVE_PROBES_SETTABLE to serve or report `tcp.keepalive.interval` / `retries`.

import { Socket } from "node:net";
import { parseDurationMs } from "./duration.js";

/** Whether this Node.js sets a socket's TCP keepalive probe interval and count (Node.js 26's four-argument form). */
export const KEEPALIVE_PROBES_SETTABLE = Socket.prototype.setKeepAlive.length >= 4;

/** The probe interval and count the spec gives when a policy's `keepalive` leaves them unset. */
export const DEFAULT_KEEPALIVE_PROBES = { intervalMs: 180_000, count: 9 } as const;
/** The idle time the spec gives when a policy's `keepalive` leaves it unset. */
const DEFAULT_KEEPALIVE_TIME_MS = 180_000;

/** A policy's `tcp.keepalive` with the spec's defaults filled in (idle time, probe interval, probe count). */
export function keepaliveSettings(k: Readonly<Record<string, unknown>>): {
  readonly timeMs: number;
  readonly intervalMs: number;
  readonly probes: number;
} {
  const ms = (v: unknown) => (typeof v === "string" ? parseDurationMs(v) : undefined);
  return {
    timeMs: ms(k.time) ?? DEFAULT_KEEPALIVE_TIME_MS,
    intervalMs: ms(k.interval) ?? DEFAULT_KEEPALIVE_PROBES.intervalMs,
    probes: typeof k.retries === "number" ? k.retries : DEFAULT_KEEPALIVE_PROBES.count,
  };
}

export interface KeepaliveProbes {
  readonly intervalMs: number;
  readonly count: number;
}

/**
 * Turns TCP keepalive on: the idle time, and the probes when given and this Node.js sets them (before Node.js 26 only
 * the idle time is set; the translators report that in status).
 */
export function setTcpKeepalive(socket: Socket, timeMs: number, probes: KeepaliveProbes | undefined): void {
  if (probes === undefined || !KEEPALIVE_PROBES_SETTABLE) socket.setKeepAlive(true, timeMs);
  // Node.js 26's form; @types/node still declares the two-argument one.
  else
    (socket.setKeepAlive as (e: boolean, d: number, i: number, n: number) => Socket)(
      true,
      timeMs,
      probes.intervalMs,
      probes.count,
    );
}

/** Why the probes are not Sluice's on this Node.js (for status), `part` being `interval` or `count`. */
export function keepaliveProbesUnserved(part: "interval" | "count", to: string): string {
  return `Node.js ${process.version}, which runs Sluice, sets only the keepalive idle time on its sockets to ${to}; libuv fixes the probe ${part} at ${part === "interval" ? "1 s" : "10"} (Node.js 26 sets it)`;
}
