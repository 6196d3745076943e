// The HTTP/1.1 side of the hot-path server: Envoy's HTTP ext_authz client, one request at a time per connection,
// each a head without a body, each answered synchronously.
//
// Why not node:http: its IncomingMessage and ServerResponse, with their streams and events, cost more than the
// decision itself; here a check costs Sluice about 5 µs less CPU (bench/authz: 28–29 instead of 33–34 µs per check at
// 4 connections), and bench/authz's Sluice route is bounded by the CPU the host shares. Here a connection is a buffer, a head is one latin1 string split
// into lines, and an answer is one write. The surface is small: request line and header fields (RFC 9112 §3, §5),
// Content-Length bodies read and dropped, keep-alive and `Connection: close`, pipelined requests answered in order.
// Anything else (chunked bodies, obs-fold, bad tokens, bare CR/LF in a value, a head over the limit) gets 400 or 431
// and the connection is closed; nothing else is affected. Tested with Node's HTTP client and raw sockets
// (test/unit/http1.test.ts) and, end to end, Envoy.

import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { DEFAULT_LIMITS, type ServerLimits } from "./limits.js";

/** What a handler gets: the fields node:http's IncomingMessage has under the same names (values as latin1). */
export interface Http1Request {
  readonly method: string;
  readonly url: string;
  /** Names and values in turn, as received (node:http's rawHeaders). */
  readonly rawHeaders: readonly string[];
}

export interface Http1Answer {
  readonly status: number;
  readonly headers?: readonly (readonly [string, string])[];
  readonly body?: string;
}

export type Http1Handler = (req: Http1Request) => Http1Answer;

/**
 * A request with an `Upgrade` header offered to another protocol (the Realtime relay's websockets): true when it takes
 * the connection, which from then on is its own with `rest`, the bytes read after the head; false to answer it here.
 */
export type Http1Upgrade = (req: Http1Request, socket: Socket, rest: Buffer) => boolean;

/** The default ceiling of a request head (ServerLimits.maxHeadBytes, ./limits.ts). */
export const MAX_HEAD = DEFAULT_LIMITS.maxHeadBytes;

const END_OF_HEAD = Buffer.from("\r\n\r\n", "latin1");
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([^\s]+) HTTP\/1\.([01])$/;
/** In a field value: CTLs other than HTAB, which RFC 9110 §5.5 does not allow (a bare CR or LF included). */
const BAD_VALUE = /[\0-\x08\x0a-\x1f\x7f]/;
const OWS_START = /^[ \t]+/;
const OWS_END = /[ \t]+$/;

const ALLOW_200 = Buffer.from("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", "latin1");

class BadRequest extends Error {
  constructor(
    readonly status: 400 | 431,
    message: string,
  ) {
    super(message);
  }
}

/** The bytes of an answer; names and values that would break the framing are a bug of the handler. */
export function serializeAnswer(a: Http1Answer, close: boolean): Buffer {
  if (a.status === 200 && (a.headers?.length ?? 0) === 0 && (a.body ?? "") === "" && !close) return ALLOW_200;
  if (!Number.isInteger(a.status) || a.status < 200 || a.status > 999) throw new Error(`bad status ${a.status}`);
  const body = Buffer.from(a.body ?? "", "utf8");
  let head = `HTTP/1.1 ${a.status} ${STATUS_CODES[a.status] ?? "Unknown"}\r\n`;
  for (const [name, value] of a.headers ?? []) {
    const lower = name.toLowerCase();
    if (lower === "content-length" || lower === "connection" || lower === "transfer-encoding") continue;
    if (!TOKEN.test(name) || BAD_VALUE.test(value)) throw new Error(`bad response header ${JSON.stringify(name)}`);
    head += `${name}: ${value}\r\n`;
  }
  head += `content-length: ${body.byteLength}\r\n${close ? "connection: close\r\n" : ""}\r\n`;
  return Buffer.concat([Buffer.from(head, "latin1"), body]);
}

/** One HTTP/1.1 connection. `initial`: bytes already read from the socket (the server looked at them first). */
export class Http1Connection {
  readonly #socket: Socket;
  readonly #handler: Http1Handler;
  readonly #log: (line: string) => void;
  #buf: Buffer | undefined;
  /** Where to look for the end of the head next (what was searched already cannot hold it). */
  #scanned = 0;
  /** Body bytes of the current request still to drop. */
  #skip = 0;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  readonly #upgrade: Http1Upgrade | undefined;
  readonly #limits: ServerLimits;
  /** Closes a connection that sends nothing for limits.idleTimeoutMs (checked lazily: no timer per request). */
  #idle: NodeJS.Timeout | undefined;
  #lastActive = Date.now();
  readonly #listeners: { data: (chunk: Buffer) => void; end: () => void };

  constructor(
    socket: Socket,
    handler: Http1Handler,
    log: (line: string) => void,
    initial?: Buffer,
    upgrade?: Http1Upgrade,
    limits: ServerLimits = DEFAULT_LIMITS,
  ) {
    this.#limits = limits;
    this.#socket = socket;
    this.#handler = handler;
    this.#log = log;
    this.#upgrade = upgrade;
    this.#listeners = { data: (chunk: Buffer) => this.#onData(chunk), end: () => this.close() };
    socket.setNoDelay(true);
    socket.on("data", this.#listeners.data);
    socket.on("error", this.#listeners.end);
    socket.on("close", this.#listeners.end);
    this.#armIdle(limits.idleTimeoutMs);
    if (initial !== undefined && initial.byteLength > 0) this.#onData(initial);
  }

  #armIdle(ms: number): void {
    this.#idle = setTimeout(() => {
      this.#idle = undefined;
      if (this.#closed) return;
      const quiet = Date.now() - this.#lastActive;
      if (quiet >= this.#limits.idleTimeoutMs) this.close();
      else this.#armIdle(this.#limits.idleTimeoutMs - quiet);
    }, ms);
    this.#idle.unref();
  }

  /** An upgrade handler took the connection: this object lets go of the socket without closing it. */
  #handOver(): void {
    this.#closed = true;
    this.#clearTimer();
    this.#buf = undefined;
    this.#socket.off("data", this.#listeners.data);
    this.#socket.off("error", this.#listeners.end);
    this.#socket.off("close", this.#listeners.end);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#clearTimer();
    this.#buf = undefined;
    this.#socket.destroy();
  }

  #clearTimer(): void {
    if (this.#idle !== undefined && this.#closed) {
      clearTimeout(this.#idle);
      this.#idle = undefined;
    }
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #onData(chunk: Buffer): void {
    if (this.#closed) return;
    this.#lastActive = Date.now();
    this.#buf = this.#buf === undefined || this.#buf.byteLength === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    try {
      this.#drain();
    } catch (e) {
      if (!(e instanceof BadRequest)) throw e;
      this.#fail(e.status, e.message);
    }
  }

  /** Answers every complete request in the buffer, in order. */
  #drain(): void {
    for (;;) {
      let buf = this.#buf;
      if (buf === undefined || this.#closed) return;
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, buf.byteLength);
        this.#skip -= n;
        buf = this.#buf = buf.subarray(n);
        if (this.#skip > 0) return;
      }
      if (buf.byteLength === 0) {
        this.#clearTimer();
        return;
      }
      const end = buf.indexOf(END_OF_HEAD, this.#scanned);
      if (end < 0) {
        if (buf.byteLength > this.#limits.maxHeadBytes) throw new BadRequest(431, "request head too large");
        this.#scanned = Math.max(0, buf.byteLength - (END_OF_HEAD.byteLength - 1));
        if (this.#timer === undefined) {
          this.#timer = setTimeout(
            () => this.#fail(400, "request head not complete in time"),
            this.#limits.headTimeoutMs,
          );
          this.#timer.unref();
        }
        return;
      }
      this.#clearTimer();
      if (end > this.#limits.maxHeadBytes) throw new BadRequest(431, "request head too large");
      const head = buf.toString("latin1", 0, end);
      this.#buf = buf.subarray(end + END_OF_HEAD.byteLength);
      this.#scanned = 0;
      const { request, close, length } = parseHead(head);
      if (this.#upgrade !== undefined && length === 0 && hasUpgrade(request)) {
        const rest = this.#buf;
        this.#handOver();
        if (this.#upgrade(request, this.#socket, rest ?? Buffer.alloc(0))) return;
        // Not the handler's: answered here as any request (a check does not upgrade).
        this.#closed = false;
        this.#armIdle(this.#limits.idleTimeoutMs);
        this.#buf = rest;
        this.#socket.on("data", this.#listeners.data);
        this.#socket.on("error", this.#listeners.end);
        this.#socket.on("close", this.#listeners.end);
      }
      this.#skip = length;
      let answer: Http1Answer;
      try {
        answer = this.#handler(request);
      } catch (e) {
        this.#log(`sluice: HTTP/1.1 handler failed: ${String(e)}`);
        answer = { status: 500 };
      }
      this.#socket.write(serializeAnswer(answer, close));
      if (close) {
        this.#closed = true;
        this.#clearTimer();
        this.#socket.end();
        return;
      }
    }
  }

  #fail(status: 400 | 431, why: string): void {
    if (this.#closed) return;
    this.#log(`sluice: HTTP/1.1 connection closed: ${why}`);
    this.#closed = true;
    this.#clearTimer();
    this.#buf = undefined;
    this.#socket.end(serializeAnswer({ status }, true));
  }
}

function hasUpgrade(req: Http1Request): boolean {
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if ((req.rawHeaders[i] as string).length === 7 && (req.rawHeaders[i] as string).toLowerCase() === "upgrade")
      return true;
  }
  return false;
}

/** The request in a head (request line and fields, without the blank line); throws BadRequest. */
export function parseHead(head: string): { request: Http1Request; close: boolean; length: number } {
  const lines = head.split("\r\n");
  // A server should ignore at least one empty line before the request line (RFC 9112 §2.2).
  let i = 0;
  while (i < lines.length && lines[i] === "") i++;
  const m = REQUEST_LINE.exec(lines[i] ?? "");
  if (m === null) throw new BadRequest(400, "malformed request line");
  const [, method, url, minor] = m as unknown as [string, string, string, string];
  const rawHeaders: string[] = [];
  let length: number | undefined;
  let close = minor === "0";
  for (i++; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(":");
    // obs-fold (a line starting with whitespace) is rejected, as RFC 9112 §5.2 allows.
    if (colon <= 0) throw new BadRequest(400, "malformed header field");
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) throw new BadRequest(400, "malformed header name");
    const value = line
      .slice(colon + 1)
      .replace(OWS_START, "")
      .replace(OWS_END, "");
    if (BAD_VALUE.test(value)) throw new BadRequest(400, "invalid character in a header value");
    rawHeaders.push(name, value);
    switch (name.length) {
      case 10:
        if (name.toLowerCase() === "connection") {
          const tokens = value
            .toLowerCase()
            .split(",")
            .map((t) => t.trim());
          if (tokens.includes("close")) close = true;
          else if (tokens.includes("keep-alive")) close = false;
        }
        break;
      case 14:
        if (name.toLowerCase() === "content-length") {
          if (!/^[0-9]{1,15}$/.test(value)) throw new BadRequest(400, "invalid content-length");
          const n = Number(value);
          if (length !== undefined && length !== n) throw new BadRequest(400, "conflicting content-length");
          length = n;
        }
        break;
      case 17:
        // A check has no body; chunked framing is not read here, and guessing its end could desynchronize.
        if (name.toLowerCase() === "transfer-encoding") throw new BadRequest(400, "transfer-encoding not supported");
        break;
    }
  }
  return { request: { method, url, rawHeaders }, close, length: length ?? 0 };
}
