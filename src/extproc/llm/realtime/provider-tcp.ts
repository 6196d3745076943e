// A provider's `tcp` on the Realtime relay's own connections (relay.ts), as Envoy's cluster applies it
// (translate/backend/ai-provider-connection.ts providerTcp): the connect timeout, and TCP keepalive. Node.js before
// 26 sets only the keepalive idle time (TCP_KEEPIDLE); libuv then fixes the probe interval at 1 s and the count at 10
// (TCP_KEEPINTVL, TCP_KEEPCNT, seen with strace on Node 22.23, libuv 1.51), so `interval` and `retries` apply only on a
// Node.js that sets them (translate/keepalive.ts).

import type { Socket } from "node:net";
import type { ProviderConnectionIR } from "../../../translate/ir.js";
import { setTcpKeepalive } from "../../../translate/keepalive.js";

/** A provider's TCP settings as the relay's target carries them (providerTcp: the connect timeout always set). */
export type DialTcp = NonNullable<ProviderConnectionIR["tcp"]>;

/**
 * `socket`, just created toward a provider (or its tunnel's proxy), with `tcp`: destroyed with an error if it is not
 * connected within the connect timeout, and kept alive as asked. A socket already connected (TLS over a tunnel) only
 * gets the keepalive.
 */
export function dialling(socket: Socket, tcp: DialTcp | undefined): Socket {
  const k = tcp?.keepalive;
  if (k !== undefined) {
    setTcpKeepalive(socket, k.timeMs, { intervalMs: k.intervalMs, count: k.probes });
  }
  const ms = tcp?.connectTimeoutMs;
  if (ms === undefined || !socket.connecting) return socket;
  const timer = setTimeout(() => socket.destroy(new Error(`connect timeout: no connection within ${ms} ms`)), ms);
  timer.unref();
  const done = () => clearTimeout(timer);
  socket.once("connect", done);
  socket.once("close", done);
  return socket;
}
