// A client of OpenAI's Realtime API as a browser opens it: a websocket (Node's global WebSocket) whose key rides in
// OpenAI's `openai-insecure-api-key.` subprotocol, its JSON events queued for the test to read in order.

export type RealtimeEvent = Record<string, unknown>;

export interface RealtimeClient {
  readonly ws: WebSocket;
  /** The next event (waits up to 15 s). */
  next(): Promise<RealtimeEvent>;
}

/** Opens `ws://127.0.0.1:<port><path>?model=gpt-realtime` with `key` in the subprotocol; resolves once it is open. */
export async function openRealtime(port: number, path: string, key: string): Promise<RealtimeClient> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${path}?model=gpt-realtime`, [
    "realtime",
    `openai-insecure-api-key.${key}`,
  ]);
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
