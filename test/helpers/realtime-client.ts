// A client of OpenAI's Realtime API as a browser opens it: a websocket (Node's global WebSocket) whose key rides in
// OpenAI's `openai-insecure-api-key.` subprotocol, its JSON events queued for the test to read in order.

import { connect, type Socket } from "node:net";

export type RealtimeEvent = Record<string, unknown>;

export interface RealtimeClient {
  readonly ws: WebSocket;
  /** The next event (waits up to 15 s). */
  next(): Promise<RealtimeEvent>;
}

/**
 * Opens `ws://127.0.0.1:<port><path>?model=gpt-realtime` with `key` in the subprotocol; resolves once it is open.
 * `headers`: more upgrade headers (Node's WebSocket, undici's, takes them where a browser's cannot).
 */
export async function openRealtime(
  port: number,
  path: string,
  key: string,
  headers?: Readonly<Record<string, string>>,
): Promise<RealtimeClient> {
  const protocols = ["realtime", `openai-insecure-api-key.${key}`];
  const ws = new WebSocket(
    `ws://127.0.0.1:${port}${path}?model=gpt-realtime`,
    // undici's WebSocketInit; the DOM type knows protocols only.
    (headers !== undefined ? { protocols, headers } : protocols) as unknown as string[],
  );
  const queue: RealtimeEvent[] = [];
  const waiting: ((e: RealtimeEvent) => void)[] = [];
  ws.addEventListener("message", (m) => {
    const e = JSON.parse(String(m.data)) as RealtimeEvent;
    const w = waiting.shift();
    if (w !== undefined) w(e);
    else queue.push(e);
  });
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve());
    ws.addEventListener("error", () => reject(new Error(`websocket to ${path} failed to open`)));
  });
  const next = () => {
    const e = queue.shift();
    if (e !== undefined) return Promise.resolve(e);
    return new Promise<RealtimeEvent>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("no event within 15 s")), 15_000);
      waiting.push((ev) => {
        clearTimeout(t);
        resolve(ev);
      });
    });
  };
  return { ws, next };
}

/** A websocket upgrade `GET <path>` sent raw to 127.0.0.1:`port` (`headers`: more header lines). */
function rawUpgrade(port: number, path: string, headers: readonly string[]): Socket {
  const s = connect(port, "127.0.0.1", () =>
    s.write(
      [
        `GET ${path} HTTP/1.1`,
        `Host: 127.0.0.1:${port}`,
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        ...headers,
        "",
        "",
      ].join("\r\n"),
    ),
  );
  return s;
}

/**
 * The status line and body of a websocket upgrade the gateway refuses: `GET <path>` sent raw to 127.0.0.1:`port`
 * (`headers`: more header lines), read until the gateway closes the connection.
 */
export function refusedUpgrade(
  port: number,
  path: string,
  headers: readonly string[] = [],
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const s = rawUpgrade(port, path, headers);
    let text = "";
    s.on("data", (c: Buffer) => {
      text += c.toString("utf8");
    });
    s.on("error", reject);
    s.on("end", () =>
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]),
        body: text.slice(text.indexOf("\r\n\r\n") + 4),
      }),
    );
    setTimeout(() => s.destroy(), 15_000).unref();
  });
}

/** The status and head of the answer to a websocket upgrade sent raw (its head is all that is read: a 101 too). */
export function upgradeAnswer(
  port: number,
  path: string,
  headers: readonly string[],
): Promise<{ status: number; head: string }> {
  return new Promise((resolve, reject) => {
    const s = rawUpgrade(port, path, headers);
    let text = "";
    s.on("data", (c: Buffer) => {
      text += c.toString("latin1");
      if (!text.includes("\r\n\r\n")) return;
      s.destroy();
      const head = text.slice(0, text.indexOf("\r\n\r\n"));
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), head });
    });
    s.on("error", reject);
  });
}

/** The events `next` gives until one of `type`, that one included. */
export async function untilEvent(next: () => Promise<RealtimeEvent>, type: string): Promise<RealtimeEvent[]> {
  const out: RealtimeEvent[] = [];
  for (;;) {
    const e = await next();
    out.push(e);
    if (e.type === type) return out;
  }
}

/** The code and reason `ws` will be closed with (by either side). */
export function closeOf(ws: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((r) => ws.addEventListener("close", (e) => r({ code: e.code, reason: e.reason })));
}

/** A client's conversation.item.create of a user message with one input_text. */
export const userTextEvent = (text: string): string =>
  JSON.stringify({
    type: "conversation.item.create",
    event_id: "evt_client_1",
    item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
  });
