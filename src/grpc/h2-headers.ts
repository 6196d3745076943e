// What makes an HTTP/2 request's header list well formed (RFC 9113 §8.2, §8.3): checked once per stream, while the
// list is turned into the handler's record. A malformed request is a stream error (PROTOCOL_ERROR), not the
// connection's.

import type { Header } from "./hpack.js";

/** A field name may hold no uppercase, controls, space, DEL or non-ASCII (RFC 9113 §8.2.1). */
const BAD_NAME = /[^\x21-\x40\x5b-\x7e]/;
/** A field value may hold no NUL, CR or LF (RFC 9113 §8.2.1); nor start or end with whitespace (badEdge). */
const BAD_VALUE = /[\0\r\n]/;
/** Fields that belong to one HTTP/1.1 connection and have no meaning in HTTP/2 (RFC 9113 §8.2.2). */
const CONNECTION_SPECIFIC = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]);
const CONTENT_LENGTH = /^[0-9]{1,15}$/;

export interface RequestHead {
  /** Names to values; a repeated name's values joined with ",". No prototype: any name is a plain key. */
  readonly headers: Record<string, string>;
  /** The declared content-length, if any: the DATA received must add up to it. */
  readonly contentLength: number | undefined;
}

function badEdge(value: string): boolean {
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(value.length - 1);
  return first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09;
}

/**
 * Names already seen to be plain regular fields (valid, not pseudo, not connection-specific, not te or content-length):
 * Envoy sends the same few on every stream, so they are checked once. Bounded: emptied when full.
 */
const ORDINARY = new Set<string>();
const ORDINARY_MAX = 1024;

/**
 * The record handed to handlers: its prototype has no properties (a field named `constructor` or `__proto__` is a
 * plain key), yet it stays a fast object, unlike Object.create(null).
 */
const Fields = function Fields() {} as unknown as new () => Record<string, string>;
Fields.prototype = Object.create(null);

/** The request's fields as a record, or why the request is malformed. */
export function requestHead(list: readonly Header[]): RequestHead | string {
  const headers = new Fields();
  let regular = false;
  let contentLength: number | undefined;
  for (const [name, value] of list) {
    if (value.length > 0 && (badEdge(value) || BAD_VALUE.test(value))) return `invalid value in ${name}`;
    if (!ORDINARY.has(name)) {
      if (name.charCodeAt(0) === 0x3a) {
        if (regular) return "pseudo-header field after a regular field";
        if (name !== ":method" && name !== ":scheme" && name !== ":path" && name !== ":authority")
          return `pseudo-header field ${name} is not a request's`;
        if (headers[name] !== undefined) return `duplicate ${name}`;
        headers[name] = value;
        continue;
      }
      if (name.length === 0 || BAD_NAME.test(name)) return "invalid header field name";
      if (CONNECTION_SPECIFIC.has(name)) return `connection-specific field ${name}`;
      if (name === "te") {
        if (value !== "trailers") return "te other than trailers";
      } else if (name === "content-length") {
        if (!CONTENT_LENGTH.test(value)) return "invalid content-length";
        const n = Number(value);
        if (contentLength !== undefined && contentLength !== n) return "conflicting content-length";
        contentLength = n;
      } else {
        if (ORDINARY.size >= ORDINARY_MAX) ORDINARY.clear();
        ORDINARY.add(name);
      }
    }
    regular = true;
    const prior = headers[name];
    headers[name] = prior === undefined ? value : `${prior},${value}`;
  }
  const method = headers[":method"];
  if (method === undefined) return "no :method";
  if (method === "CONNECT") {
    if (headers[":scheme"] !== undefined || headers[":path"] !== undefined || headers[":authority"] === undefined)
      return "CONNECT with :scheme or :path, or without :authority";
  } else {
    if (headers[":scheme"] === undefined) return "no :scheme";
    const path = headers[":path"];
    if (path === undefined || path.length === 0) return "no :path";
  }
  return { headers, contentLength };
}

/** Why trailers are malformed, if they are: no pseudo-header fields, and names and values as in a request. */
export function trailersProblem(list: readonly Header[]): string | undefined {
  for (const [name, value] of list) {
    if (name.length === 0 || BAD_NAME.test(name)) return "invalid trailer field name";
    if (name.charCodeAt(0) === 0x3a) return "pseudo-header field in trailers";
    if (value.length > 0 && (badEdge(value) || BAD_VALUE.test(value))) return `invalid value in ${name}`;
  }
  return undefined;
}
