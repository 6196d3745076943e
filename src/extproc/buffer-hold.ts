// `buffer.request` / `buffer.response` with `failureMode: FailOpen` (src/translate/xds/buffer-fail-open.ts): Sluice
// holds a body up to the policy's maxBytes and passes a larger one on unbuffered. Envoy sends the headers and the body
// chunks without waiting (FULL_DUPLEX_STREAMED); Sluice keeps the headers' answer back, collecting chunks, until the
// body ends or maxBytes is reached, then answers the headers and sends what it holds as one chunk; later chunks are
// sent back as they come. So the backend (or the client) sees the message only once it is whole or too large to hold.

import type { ExtProcRequest, Reply } from "./llm/wire.js";

/** The most Sluice holds of each direction's body, in bytes (absent: that direction is not sent here). */
export interface HoldSpec {
  readonly request?: number;
  readonly response?: number;
}

interface HoldCall {
  write(r: Reply): void;
  end(): void;
  on(event: "data", f: (req: ExtProcRequest) => void): void;
  on(event: "end" | "error", f: () => void): void;
}

type Side = { readonly limit: number; held: Uint8Array[]; size: number; passing: boolean; headersAnswered: boolean };

/** One stream: one request and its response. */
export function serveHold(call: HoldCall, spec: HoldSpec): void {
  let closed = false;
  const sides = {
    request: { limit: spec.request ?? 0, held: [], size: 0, passing: false, headersAnswered: false } as Side,
    response: { limit: spec.response ?? 0, held: [], size: 0, passing: false, headersAnswered: false } as Side,
  };
  const write = (r: Reply) => {
    if (!closed) call.write(r);
  };
  call.on("error", () => {
    closed = true;
  });
  call.on("end", () => {
    if (!closed) {
      closed = true;
      call.end();
    }
  });
  const phases = {
    request: { headers: "requestHeaders", body: "requestBody", trailers: "requestTrailers" },
    response: { headers: "responseHeaders", body: "responseBody", trailers: "responseTrailers" },
  } as const;
  /** Answers the headers (once) and sends what is held as one chunk; from then on chunks pass as they come. */
  const release = (dir: "request" | "response", endOfStream: boolean) => {
    const s = sides[dir];
    if (!s.headersAnswered) {
      s.headersAnswered = true;
      write({ phase: phases[dir].headers });
    }
    s.passing = true;
    if (s.size > 0 || endOfStream) {
      write({ phase: phases[dir].body, body: Buffer.concat(s.held), streamed: { endOfStream } });
    }
    s.held = [];
    s.size = 0;
  };
  call.on("data", (req) => {
    const r = req.request;
    const dir =
      r.case === "requestHeaders" || r.case === "requestBody" || r.case === "requestTrailers" ? "request" : "response";
    const s = sides[dir];
    switch (r.case) {
      case "requestHeaders":
      case "responseHeaders":
        // A message without a body has nothing to hold.
        if (r.value.endOfStream) {
          s.headersAnswered = true;
          write({ phase: phases[dir].headers });
        }
        return;
      case "requestBody":
      case "responseBody": {
        if (s.passing) {
          write({ phase: phases[dir].body, body: r.value.body, streamed: { endOfStream: r.value.endOfStream } });
          return;
        }
        if (r.value.body.byteLength > 0) {
          s.held.push(r.value.body);
          s.size += r.value.body.byteLength;
        }
        if (r.value.endOfStream || s.size >= s.limit) release(dir, r.value.endOfStream);
        return;
      }
      case "requestTrailers":
      case "responseTrailers":
        // The body ends with trailers: what is held goes first (without end of stream: the trailers end it).
        if (!s.passing) release(dir, false);
        write({ phase: phases[dir].trailers });
        return;
      default:
        return;
    }
  });
}
