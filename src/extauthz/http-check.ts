// The HTTP form of Sluice's ext_authz check, for policies that read only the request and its source (no JWT claims,
// API key or basic-auth identity, no user extAuth, no headers to the upstream): Envoy's HTTP ext_authz client costs
// Envoy about half as much per check as its gRPC client, and the check needs nothing gRPC carries beyond the request.
//
// Envoy sends the request's method and headers, with path `/sluice/authz<the request's path>`, plus headers the
// translator has it add (src/translate/xds/filters/ext-authz-sluice.ts): the policy id (from route metadata), the
// downstream address, the scheme, and the request's own values of the headers Envoy's client sets on the check
// request (content-length: the check carries none of the body; x-envoy-internal: the check is Envoy's own request).
// The fields rebuilt here are the ones the gRPC CheckRequest carries for the same request, pseudo-headers included,
// so CEL sees the same `request` and `source` on both transports (test/e2e/authz-transports.test.ts). Sluice's own
// added headers are reserved: CEL never sees them, on either transport.
//
// The answer is 200 to allow; a denial is its status, headers and body, which Envoy passes to the client.

import type { CheckResponse } from "../gen/envoy/service/auth/v3/external_auth_pb.js";
import type { Http1Answer, Http1Request } from "../grpc/http1.js";
import type { CheckFields } from "./check-request.js";

/** The path prefix of every HTTP check: the request's own path follows it. */
export const HTTP_AUTHZ_PREFIX = "/sluice/authz";

/** The prefix of the headers Sluice has Envoy add to a check; Envoy drops a client's (disallowed_headers). */
export const RESERVED_PREFIX = "x-sluice-authz-";
/** What each added header's value starts with, so that an empty value is still sent (and told from none). */
export const VALUE_MARK = "v=";

/** Headers Envoy adds to each HTTP check; each value is VALUE_MARK and then the value. */
export const HTTP_AUTHZ_HEADERS = {
  /** The policy id, from the route's metadata. */
  policy: "x-sluice-authz-policy",
  /** %DOWNSTREAM_REMOTE_ADDRESS%: `ip:port`, `[ipv6]:port`, or a pipe's path. */
  source: "x-sluice-authz-source",
  /** %REQ(:SCHEME)% */
  scheme: "x-sluice-authz-scheme",
} as const;

/**
 * Headers Envoy's HTTP client sets on the check request itself, whatever the request had: the request's own value
 * (or none) comes in `x-sluice-authz-original-<name>`, from %REQ(<name>)%.
 */
export const SHADOWED_HEADERS = ["content-length", "x-envoy-internal", "x-envoy-expected-rq-timeout-ms"] as const;
export const ORIGINAL_PREFIX = "x-sluice-authz-original-";

/**
 * Removes the headers under RESERVED_PREFIX from a check's header map. Envoy drops a client's from an HTTP check, so
 * the gRPC check hides them too, and CEL sees the same headers on both transports.
 */
export function dropReservedHeaders(headers: Map<string, string>): void {
  for (const name of headers.keys()) if (name.startsWith(RESERVED_PREFIX)) headers.delete(name);
}

/** Not part of the request being checked: the check request's own headers, and hop-by-hop ones. */
const CHECK_REQUEST_ONLY = new Set<string>([...SHADOWED_HEADERS, "connection", "keep-alive"]);

/**
 * The HTTP/1.1 server (src/grpc/http1.ts, as node:http) gives each byte of a header as one character (latin1); the gRPC CheckRequest has the bytes as UTF-8, and
 * so must CEL here. Plain ASCII, nearly every header, is the same either way.
 */
const NON_ASCII = /[\x80-\xff]/;

function utf8(text: string): string {
  return NON_ASCII.test(text) ? Buffer.from(text, "latin1").toString("utf8") : text;
}

/** A value of a header Sluice has Envoy add, without VALUE_MARK; null when repeated or not marked (not Envoy's). */
function marked(previous: string | null | undefined, value: string): string | null {
  return previous === undefined && value.startsWith(VALUE_MARK) ? value.slice(VALUE_MARK.length) : null;
}

/**
 * The policy id and the fields of the request being checked; a string says why the check request is malformed. One
 * pass over node's raw header list (names as sent, which Envoy sends in lowercase; values in order).
 */
export function checkFieldsOfHttp(req: Http1Request): { readonly id: string; readonly fields: CheckFields } | string {
  const url = req.url;
  if (!url.startsWith(HTTP_AUTHZ_PREFIX)) return `path does not start with ${HTTP_AUTHZ_PREFIX}`;
  const raw = req.rawHeaders;
  const headers = new Map<string, string>();
  // Sluice's own headers (RESERVED_PREFIX), by name: their value, or null when one is repeated or not marked.
  const own = new Map<string, string | null>();
  let host: string | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    const value = raw[i + 1] as string;
    if (name.startsWith(RESERVED_PREFIX)) {
      own.set(name, marked(own.get(name), value));
      continue;
    }
    // Envoy joins a repeated header's values with "," in a gRPC CheckRequest.
    if (name === "host") host = host === undefined ? value : `${host},${value}`;
    else if (!CHECK_REQUEST_ONLY.has(name)) {
      const before = headers.get(name);
      headers.set(name, before === undefined ? value : `${before},${value}`);
    }
  }
  const id = own.get(HTTP_AUTHZ_HEADERS.policy) ?? "";
  if (id === "") return `no policy id (${HTTP_AUTHZ_HEADERS.policy})`;
  for (const [name, value] of headers) if (NON_ASCII.test(value)) headers.set(name, utf8(value));
  const path = utf8(url.slice(HTTP_AUTHZ_PREFIX.length)) || "/";
  const method = req.method;
  const authority = utf8(host ?? "");
  const scheme = own.get(HTTP_AUTHZ_HEADERS.scheme) ?? "";
  for (const name of SHADOWED_HEADERS) {
    const original = own.get(`${ORIGINAL_PREFIX}${name}`);
    if (original !== undefined && original !== null && original !== "") headers.set(name, utf8(original));
  }
  // The pseudo-headers, as the gRPC CheckRequest's header map has them.
  headers.set(":authority", authority);
  headers.set(":path", path);
  headers.set(":method", method);
  if (scheme !== "") headers.set(":scheme", scheme);
  const source = parseAddress(own.get(HTTP_AUTHZ_HEADERS.source) ?? "");
  const fields: CheckFields = {
    method,
    path,
    host: authority,
    scheme,
    hasHttp: true,
    headers,
    sourcePort: source?.port ?? 0,
    contextExtensions: new Map(),
    filterMetadata: new Map(),
    ...(source !== undefined ? { sourceAddress: source.address } : {}),
  };
  return { id, fields };
}

/** `ip:port` or `[ipv6]:port` as Envoy formats a socket address; undefined for anything else (a pipe, `-`). */
export function parseAddress(text: string): { readonly address: string; readonly port: number } | undefined {
  let address: string;
  let portText: string;
  if (text.startsWith("[")) {
    const close = text.indexOf("]:");
    if (close < 0) return undefined;
    address = text.slice(1, close);
    portText = text.slice(close + 2);
  } else {
    const colon = text.lastIndexOf(":");
    if (colon <= 0 || text.indexOf(":") !== colon) return undefined;
    address = text.slice(0, colon);
    portText = text.slice(colon + 1);
  }
  if (!/^[0-9]{1,5}$/.test(portText)) return undefined;
  const port = Number(portText);
  return port <= 65_535 ? { address, port } : undefined;
}

const ALLOW: Http1Answer = { status: 200 };

/** A CheckResponse as the HTTP answer Envoy's HTTP ext_authz client expects: 200 allows; a denial goes to the client. */
export function httpCheckAnswer(response: CheckResponse): Http1Answer {
  if (response.status?.code === 0 || response.status === undefined) return ALLOW;
  const denied = response.httpResponse.case === "deniedResponse" ? response.httpResponse.value : undefined;
  const headers: [string, string][] = [];
  for (const h of denied?.headers ?? []) if (h.header !== undefined) headers.push([h.header.key, h.header.value]);
  return { status: denied?.status?.code || 403, headers, body: denied?.body ?? "" };
}
