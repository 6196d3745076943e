// A GwBackend `a2a`'s agent card, served through the Gateway with the Gateway's address: an agent publishes the URLs
// it is reached at (`url` and `additionalInterfaces[].url` in A2A 0.3, `supportedInterfaces[].url` in 1.0), which are
// its own; a client that read them would go around the Gateway. Sluice's ext_proc stage `a2a` (one stream per request,
// enabled on routes to a2a backends by src/translate/xds/filters/a2a.ts) asks Envoy for the response of a GET of the
// card alone, and gives each URL the scheme and authority the client used, keeping its path. Every other request
// (JSON-RPC, SSE streams) is answered at its headers and never buffered.

import type { ExtProcHeaders, ExtProcRequest, Reply } from "../extproc/llm/wire.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";

/** The value of the stage metadata that routes a Sluice ext_proc stream here. */
export const A2A_STAGE = "a2a";

/** Where agents publish their card: A2A 0.3 and 1.0, and the name earlier versions used. */
const CARD_SUFFIXES = ["/.well-known/agent-card.json", "/.well-known/agent.json"];

export function isAgentCardPath(path: string): boolean {
  const p = path.split("?")[0] ?? "";
  return CARD_SUFFIXES.some((s) => p.endsWith(s));
}

/** The Gateway's origin as the client reached it: Envoy's x-forwarded-proto (it sets it from the connection) and :authority. */
export function gatewayOrigin(headers: Readonly<Record<string, string>>): string | undefined {
  const authority = headers[":authority"] ?? headers["host"];
  if (authority === undefined || authority === "") return undefined;
  const scheme = (headers["x-forwarded-proto"] ?? headers[":scheme"] ?? "http").split(",")[0]?.trim() || "http";
  return `${scheme}://${authority}`;
}

function onOrigin(url: unknown, origin: string): unknown {
  if (typeof url !== "string") return url;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url; // not an absolute URL: left as the agent wrote it
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return url;
  return `${origin}${u.pathname}${u.search}${u.hash}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The card with every interface URL on `origin` (paths kept); other fields as they were. */
export function rewriteAgentCard(card: unknown, origin: string): unknown {
  if (!isRecord(card)) return card;
  const out: Record<string, unknown> = { ...card };
  if ("url" in out) out["url"] = onOrigin(out["url"], origin);
  for (const list of ["additionalInterfaces", "supportedInterfaces"]) {
    const xs = out[list];
    if (!Array.isArray(xs)) continue;
    out[list] = xs.map((x) => (isRecord(x) && "url" in x ? { ...x, url: onOrigin(x["url"], origin) } : x));
  }
  return out;
}

export interface A2aCall {
  on(event: "data", fn: (req: ExtProcRequest) => void): void;
  on(event: "end", fn: () => void): void;
  on(event: "error", fn: (e: Error) => void): void;
  write(r: Reply): void;
  end(): void;
}

const utf8 = new TextDecoder();

function headerMap(h: ExtProcHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const x of h.headers?.headers ?? []) {
    const v = x.value !== "" ? x.value : utf8.decode(x.rawValue);
    out[x.key] = x.key in out ? `${out[x.key]},${v}` : v;
  }
  return out;
}

const CARD_RESPONSE = {
  requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
  responseHeaderMode: ProcessingMode_HeaderSendMode.SEND,
  requestBodyMode: ProcessingMode_BodySendMode.NONE,
  responseBodyMode: ProcessingMode_BodySendMode.BUFFERED,
  requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
  responseTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
};

/** One stream: one request to an a2a backend, and for the card its response. */
export function serveA2a(call: A2aCall, log: (m: string) => void): void {
  let origin: string | undefined;
  let rewrite = false;
  let closed = false;
  const answer = (r: Reply, last: boolean) => {
    if (closed) return;
    call.write(r);
    if (last) {
      closed = true;
      call.end();
    }
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
  call.on("data", (req) => {
    const r = req.request;
    switch (r.case) {
      case "requestHeaders": {
        const h = headerMap(r.value);
        origin = h[":method"] === "GET" && isAgentCardPath(h[":path"] ?? "") ? gatewayOrigin(h) : undefined;
        if (origin === undefined) {
          answer({ phase: "requestHeaders" }, true);
          return;
        }
        // The card as plain JSON (not compressed), so that it can be read and written.
        answer(
          { phase: "requestHeaders", headers: { set: {}, remove: ["accept-encoding"] }, modeOverride: CARD_RESPONSE },
          false,
        );
        return;
      }
      case "responseHeaders": {
        const h = headerMap(r.value);
        rewrite = h[":status"] === "200" && /\bjson\b/i.test(h["content-type"] ?? "");
        answer({ phase: "responseHeaders" }, r.value.endOfStream);
        return;
      }
      case "responseBody": {
        if (!rewrite || origin === undefined) {
          answer({ phase: "responseBody" }, r.value.endOfStream);
          return;
        }
        let card: unknown;
        try {
          card = JSON.parse(utf8.decode(r.value.body));
        } catch {
          log("a2a: the agent card is not JSON; passed on as the agent sent it");
          answer({ phase: "responseBody" }, true);
          return;
        }
        const body = JSON.stringify(rewriteAgentCard(card, origin));
        answer(
          {
            phase: "responseBody",
            // The agent's ETag names the card it wrote, not this one.
            headers: { set: { "content-length": String(Buffer.byteLength(body)) }, remove: ["etag"] },
            body,
          },
          true,
        );
        return;
      }
      default:
        return;
    }
  });
}
