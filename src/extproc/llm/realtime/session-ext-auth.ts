// A provider's extAuth (a GwPolicy's `backend.extAuth` targeting it) on a Realtime session through Sluice's relay
// (relay.ts): checked once per session, on the upgrade, before the provider is called, with the call, cache and failure
// mode of an attempt's check (../provider-ext-auth.ts). The relay's peer is Envoy, so what the check needs of the
// client's request beyond its headers comes in headers the relay route sets from Envoy's own state, overwriting or
// removing any a client sent (xds/realtime-relay.ts): the client's address and Envoy's, and the route's identity.

import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY } from "../../../cel/rbac.js";
import { EXTAUTHZ_METADATA_NAMESPACE } from "../../../extauthz/user-ext-auth.js";
import type { LlmProviderEntry } from "../../../translate/llm/table.js";
import {
  REALTIME_AUTHZ_HEADER,
  REALTIME_DESTINATION_HEADER,
  REALTIME_JWT_HEADER,
  REALTIME_SOURCE_HEADER,
} from "../../../translate/names.js";
import { identityVariables, requestVariable, toCel } from "../cel.js";
import {
  type Allowed,
  type Denial,
  denialReply,
  endpointOf,
  type Peer,
  type ProviderExtAuths,
  sourceVariable,
  withAllowedHeaders,
} from "../provider-ext-auth.js";

/**
 * The provider's extAuth on the session's upgrade, as the LLM ext_proc checks an attempt: the client's headers as
 * Envoy forwarded them (the relay's own headers left out), `request`, `llm.provider`, `source` and the route's
 * identity in CEL. Allowed when the provider has none. Never rejects.
 */
export function checkSession(
  extAuths: ProviderExtAuths,
  provider: LlmProviderEntry,
  headers: Readonly<Record<string, string>>,
  url: string,
): Promise<{ allow: Allowed } | { deny: Denial }> {
  if (provider.extAuth === undefined) return Promise.resolve({ allow: { set: {}, remove: [] } });
  const { client, activation, peer } = sessionRequest(headers, url);
  return extAuths.check(provider.extAuth, {
    headers: client,
    activation: { ...activation, llm: toCel({ provider: provider.name }) },
    peer,
  });
}

/**
 * The session's upgrade as the client sent it: its headers as Envoy forwarded them (the relay's own left out), the
 * client's and Envoy's addresses, and the CEL variables `request`, `source` and the route's identity.
 */
export function sessionRequest(
  headers: Readonly<Record<string, string>>,
  url: string,
): { client: Record<string, string>; activation: Record<string, unknown>; peer: Peer } {
  const client: Record<string, string> = {
    ":method": "GET",
    ":path": url,
    ":authority": headers.host ?? "",
    ":scheme": headers["x-forwarded-proto"] ?? "http",
  };
  // Not the client's: the relay's own headers, and what Envoy's router adds on the way to the relay.
  for (const [k, v] of Object.entries(headers)) {
    if (!k.startsWith("x-sluice-") && !k.startsWith("x-envoy-") && k !== "host") client[k] = v;
  }
  const source = endpointOf(headers[REALTIME_SOURCE_HEADER], undefined);
  const destination = endpointOf(headers[REALTIME_DESTINATION_HEADER], undefined);
  const peer: Peer = {
    ...(source !== undefined ? { source } : {}),
    ...(destination !== undefined ? { destination } : {}),
  };
  const src = sourceVariable(peer);
  return {
    client,
    activation: {
      ...identityOf(headers),
      request: requestVariable(client),
      ...(src !== undefined ? { source: src } : {}),
    },
    peer,
  };
}

/** A JSON object a header of the relay route carries (xds/realtime-relay.ts); undefined when absent or not one. */
function jsonHeader(v: string | undefined): Record<string, unknown> | undefined {
  if (v === undefined || !v.startsWith("{")) return undefined;
  try {
    const o = JSON.parse(v) as unknown;
    return typeof o === "object" && o !== null && !Array.isArray(o) ? (o as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `jwt`, `apiKey`, `basicAuth`, `extauthz` as the route's filters left them, from the headers the relay route sets
 * from Envoy's dynamic metadata (a client's own are removed first): as the LLM ext_proc reads them (identityVariables).
 */
function identityOf(headers: Readonly<Record<string, string>>): Record<string, unknown> {
  const jwt = jsonHeader(headers[REALTIME_JWT_HEADER]);
  const authz = jsonHeader(headers[REALTIME_AUTHZ_HEADER]);
  return identityVariables({
    ...(jwt !== undefined ? { [JWT_METADATA_NAMESPACE]: { [JWT_PAYLOAD_KEY]: jwt } } : {}),
    ...(authz !== undefined ? { [EXTAUTHZ_METADATA_NAMESPACE]: authz } : {}),
  });
}

/** A provider's extAuth denial, as the client's upgrade answer: the service's status, headers and body. */
export function answerDenial(socket: Socket, provider: string, d: Denial): void {
  const r = denialReply(undefined, provider, d);
  if (r.phase !== "immediate") return;
  const lines = [`HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? "Error"}`];
  // A value that could end the header line is left out (the handshake is written as text).
  const ok = (k: string, v: string) => !/[\r\n]/.test(k) && !/[\r\n]/.test(v);
  for (const [k, v] of Object.entries(r.headers.set ?? {})) if (ok(k, v)) lines.push(`${k}: ${v}`);
  for (const [k, v] of r.headers.add ?? []) if (ok(k, v) && !(k in (r.headers.set ?? {}))) lines.push(`${k}: ${v}`);
  lines.push(`content-length: ${Buffer.byteLength(r.body)}`, "connection: close");
  socket.end(`${lines.join("\r\n")}\r\n\r\n${r.body}`);
}

/** Client headers a check's allowed headers never replace: the websocket's own and the client's credentials. */
const HANDSHAKE = [
  "sec-websocket-key",
  "sec-websocket-version",
  "sec-websocket-protocol",
  "sec-websocket-extensions",
  "authorization",
  "x-api-key",
  "api-key",
  "x-goog-api-key",
];

/** The provider's upgrade with an allowed check's headers: added (never over the credentials), removed ones dropped. */
export function withAllowed(
  c: { headers: Record<string, string>; path: string },
  allow: Allowed,
): { headers: Record<string, string>; path: string; remove: readonly string[] } {
  const { work, written } = withAllowedHeaders({ set: c.headers, remove: [] as string[] }, allow, HANDSHAKE);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(work.set)) {
    if (written.includes(k) && /[\r\n]/.test(v)) continue;
    headers[k] = v;
  }
  return { headers, path: c.path, remove: work.remove };
}
