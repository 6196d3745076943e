// The limits of the hot-path server (./unary-server.ts, ./http1.ts) against peers that misbehave, in one place so that
// docs/http2.md can name each with its default. Every limit is per connection: a peer that crosses one loses its own
// stream or connection, never anyone else's.

export interface ServerLimits {
  /** SETTINGS_MAX_CONCURRENT_STREAMS: streams above it are refused (RST_STREAM REFUSED_STREAM). */
  readonly maxConcurrentStreams: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE: a decoded header list above it (RFC 9113 accounting) ends the connection. */
  readonly maxHeaderListSize: number;
  /** Bytes of one compressed header block (HEADERS plus its CONTINUATIONs). */
  readonly maxHeaderBlockBytes: number;
  /** CONTINUATION frames in one header block (a flood of tiny or empty ones is CVE-2024-27316's shape). */
  readonly maxContinuationFrames: number;
  /**
   * Stream resets (by the peer, or by this side for the peer's errors) a connection may spend: a bucket of `burst`
   * refilled at `perSecond`. Past it the connection gets GOAWAY ENHANCE_YOUR_CALM (rapid reset, CVE-2023-44487).
   */
  readonly resetBurst: number;
  readonly resetsPerSecond: number;
  /**
   * Frames that cost this side work but carry no request (PING, SETTINGS, PRIORITY, empty DATA, unknown types): the
   * same kind of bucket, then GOAWAY ENHANCE_YOUR_CALM (CVE-2019-9512, -9515, -9516, -9518).
   */
  readonly controlBurst: number;
  readonly controlPerSecond: number;
  /** Output queued in the socket above which the peer's input is not read until it drains (a peer that does not read). */
  readonly maxQueuedOutputBytes: number;
  /** A stream whose response has waited this long for the peer's flow-control window is reset (CANCEL). */
  readonly stallTimeoutMs: number;
  /** A connection with no open stream and no frame for this long is closed (GOAWAY NO_ERROR). */
  readonly idleTimeoutMs: number;
  /** A connection must tell its protocol (HTTP/2 preface or an HTTP/1.1 head) within this. */
  readonly handshakeTimeoutMs: number;
  /** HTTP/1.1: a request head that has started must be complete within this (answered 400, closed). */
  readonly headTimeoutMs: number;
  /** HTTP/1.1: bytes of a request head (request line and fields); above it 431 and the connection is closed. */
  readonly maxHeadBytes: number;
}

export const DEFAULT_LIMITS: ServerLimits = {
  maxConcurrentStreams: 1024,
  maxHeaderListSize: 64 * 1024,
  maxHeaderBlockBytes: 64 * 1024,
  maxContinuationFrames: 32,
  resetBurst: 1000,
  resetsPerSecond: 200,
  controlBurst: 1000,
  controlPerSecond: 500,
  maxQueuedOutputBytes: 4 * 1024 * 1024,
  stallTimeoutMs: 30_000,
  idleTimeoutMs: 600_000,
  handshakeTimeoutMs: 10_000,
  headTimeoutMs: 10_000,
  // Envoy's own ceiling (max_request_headers_kb is at most 8 MiB) plus what Envoy adds to a check, so a check is never
  // refused for a request Envoy accepted.
  maxHeadBytes: 8 * 1024 * 1024 + 64 * 1024,
};

/** A token bucket: `take()` is false once the peer has spent more than the burst plus what refilled since. */
export class Budget {
  #tokens: number;
  #at = Date.now();
  readonly #burst: number;
  readonly #perMs: number;

  constructor(burst: number, perSecond: number) {
    this.#tokens = burst;
    this.#burst = burst;
    this.#perMs = perSecond / 1000;
  }

  take(): boolean {
    const now = Date.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + (now - this.#at) * this.#perMs);
    this.#at = now;
    if (this.#tokens < 1) return false;
    this.#tokens--;
    return true;
  }
}
