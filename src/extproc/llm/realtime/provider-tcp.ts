// A provider's `tcp` on the Realtime relay's own connections (relay.ts), as Envoy's cluster applies it
// (translate/backend/ai-provider-connection.ts providerTcp): the connect timeout, and TCP keepalive's idle time.
// Node sets only the idle time (TCP_KEEPIDLE); libuv fixes the probe interval at 1 s and the probe count at 10
// (TCP_KEEPINTVL, TCP_KEEPCNT, seen with strace on Node 22's libuv 1.46), so `interval` and `retries` cannot apply here.

import type { Socket } from "node:net";
import type { ProviderConnectionIR } from "../../../translate/ir.js";

/** A provider's TCP settings as the relay's target carries them (providerTcp: the connect timeout always set). */
export type DialTcp = NonNullable<ProviderConnectionIR["tcp"]>;

/**
 * `socket`, just created toward a provider (or its tunnel's proxy), with `tcp`: destroyed with an error if it is not
 * connected within the connect timeout, and kept alive as asked. A socket already connected (TLS over a tunnel) only
 * gets the keepalive.
 */
export function dialling(socket: Socket, tcp: DialTcp | undefined): Socket {
  if (tcp?.keepalive !== undefined) socket.setKeepAlive(true, tcp.keepalive.timeMs);
  const ms = tcp?.connectTimeoutMs;
  if (ms === undefined || !socket.connecting) return socket;
  const timer = setTimeout(() => socket.destroy(new Error(`connect timeout: no connection within ${ms} ms`)), ms);
  timer.unref();
  const done = () => clearTimeout(timer);
  socket.once("connect", done);
  socket.once("close", done);
  return socket;
}
