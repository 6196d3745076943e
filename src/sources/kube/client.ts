// A thin Kubernetes REST client over one undici connection pool: the credentials and TLS settings come from a
// kubeconfig (or the in-cluster config) through @kubernetes/client-node, the requests are ours. client-node makes a
// new connection pool per request and its ListWatch stops on the first error; the controller issues thousands of
// status writes and must resume watches on its own terms (reflector.ts), so it speaks REST directly.

import type { RequestOptions as HttpsRequestOptions } from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { Agent, type Dispatcher, request } from "undici";

/** A request the API server answered with an error status (undici-style stable `code`). */
export class KubeApiError extends Error {
  readonly code = "SLUICE_KUBE_API";
  constructor(
    readonly status: number,
    /** The Status object's reason (NotFound, Conflict, Gone, Forbidden, ...), when the body had one. */
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

export function isKubeError(e: unknown, status: number): e is KubeApiError {
  return e instanceof KubeApiError && e.status === status;
}

export interface KubeObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly uid?: string;
    readonly resourceVersion?: string;
    readonly generation?: number;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
    readonly [k: string]: unknown;
  };
  readonly [k: string]: unknown;
}

export interface KubeList {
  readonly metadata: { readonly resourceVersion?: string; readonly continue?: string };
  readonly items: KubeObject[];
}

export interface RequestOptions {
  readonly query?: Readonly<Record<string, string | number | boolean | undefined>>;
  readonly body?: unknown;
  /** Default application/json; `application/apply-patch+yaml` for server-side apply (JSON is valid YAML). */
  readonly contentType?: string;
  readonly signal?: AbortSignal;
  /** Milliseconds until the whole request is abandoned (default 30 s), whether or not `signal` is given. */
  readonly timeoutMs?: number;
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

/** A watch that brings nothing (not even a bookmark, sent about every minute) for this long is abandoned. */
const WATCH_IDLE_MS = 180_000;
/** How long credentials read from the kubeconfig are reused: a projected ServiceAccount token file rotates. */
const CREDENTIAL_TTL_MS = 60_000;

export class KubeClient {
  readonly server: string;
  readonly #config: KubeConfig;
  readonly #agent: Dispatcher;
  #headers: Record<string, string> = {};
  #headersAt = -Infinity;

  private constructor(config: KubeConfig, server: string, agent: Dispatcher) {
    this.#config = config;
    this.server = server.replace(/\/+$/, "");
    this.#agent = agent;
  }

  /** From a kubeconfig file, `$KUBECONFIG` / ~/.kube/config, or (with neither) the in-cluster config. */
  static async load(kubeconfig?: string): Promise<KubeClient> {
    const kc = new KubeConfig();
    if (kubeconfig !== undefined) kc.loadFromFile(kubeconfig);
    else kc.loadFromDefault();
    return KubeClient.fromKubeConfig(kc);
  }

  static async fromKubeConfig(kc: KubeConfig): Promise<KubeClient> {
    const cluster = kc.getCurrentCluster();
    if (cluster === null) throw new Error("the kubeconfig has no current cluster");
    if (cluster.proxyUrl !== undefined) throw new Error("a kubeconfig cluster with proxy-url is not supported");
    // client-node works out the TLS settings (CA, client certificate, skip-verify, server name) and the credentials
    // (token, token file, exec plugin); the connections are one long-lived pool of our own.
    const opts = await credentials(kc);
    const agent = new Agent({
      connect: {
        ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
        ...(opts.cert !== undefined ? { cert: opts.cert } : {}),
        ...(opts.key !== undefined ? { key: opts.key } : {}),
        ...(opts.rejectUnauthorized !== undefined ? { rejectUnauthorized: opts.rejectUnauthorized } : {}),
        ...(opts.servername !== undefined ? { servername: opts.servername } : {}),
      },
      keepAliveTimeout: 30_000,
      // Watches are long-lived; they end with the server's timeoutSeconds or on an error.
      bodyTimeout: 0,
      headersTimeout: 30_000,
      // HTTP/1.1, one connection per request in flight (each watch holds one; no cap, or a 17th watch would starve
      // status writes). undici 8 would negotiate HTTP/2 with kube-apiserver, and aborting an HTTP/2 request whose
      // body is being sent was seen to spin Node's HTTP/2 session until the process ran out of memory.
      allowH2: false,
    });
    const client = new KubeClient(kc, cluster.server, agent);
    client.#headers = opts.headers;
    client.#headersAt = performance.now();
    return client;
  }

  async #auth(): Promise<Record<string, string>> {
    if (performance.now() - this.#headersAt > CREDENTIAL_TTL_MS) {
      this.#headers = (await credentials(this.#config)).headers;
      this.#headersAt = performance.now();
    }
    return this.#headers;
  }

  #url(path: string, query?: RequestOptions["query"]): string {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    return url.toString();
  }

  /** One request; resolves with the parsed JSON body, throws KubeApiError on a status ≥ 300. */
  async request<T = unknown>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const headers: Record<string, string> = { ...(await this.#auth()), accept: "application/json" };
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
      headers["content-type"] = opts.contentType ?? "application/json";
    }
    // A timeout of our own, and the caller's signal, without AbortSignal.any (whose composite signals stay referenced
    // by a long-lived source signal until it is collected).
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new Error(`${method} ${path}: timed out`)), opts.timeoutMs ?? 30_000);
    const onAbort = () => timeout.abort(opts.signal?.reason);
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    if (opts.signal?.aborted === true) onAbort();
    let text: string;
    let statusCode: number;
    try {
      const res = await request(this.#url(path, opts.query), {
        method: method as Dispatcher.HttpMethod,
        headers,
        ...(body !== undefined ? { body } : {}),
        dispatcher: this.#agent,
        signal: timeout.signal,
        // The caller's timeout rules (a DELETE of a whole collection may take the server longer than the pool's).
        ...(opts.timeoutMs !== undefined ? { headersTimeout: opts.timeoutMs } : {}),
      });
      statusCode = res.statusCode;
      text = await res.body.text();
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
    }
    const res = { statusCode };
    if (res.statusCode >= 300) throw apiError(res.statusCode, text, `${method} ${path}`);
    return (text === "" ? undefined : JSON.parse(text)) as T;
  }

  get<T = KubeObject>(path: string, opts?: RequestOptions): Promise<T> {
    return this.request<T>("GET", path, opts);
  }

  /** Server-side apply of `body` (a partial object with apiVersion, kind and metadata.name) at `path`. */
  apply<T = KubeObject>(path: string, body: unknown, fieldManager: string, force = true): Promise<T> {
    return this.request<T>("PATCH", path, {
      body,
      contentType: "application/apply-patch+yaml",
      query: { fieldManager, force },
    });
  }

  /**
   * A watch: calls `onEvent` for each event until the server ends the stream (resolves) or the connection fails
   * (rejects). An ERROR event with a Status object rejects with its KubeApiError (410 Gone: the resourceVersion is
   * too old). Abort with `signal`.
   */
  async watch(
    path: string,
    query: RequestOptions["query"],
    onEvent: (type: WatchEventType, object: KubeObject) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const headers = { ...(await this.#auth()), accept: "application/json" };
    // A connection that died without a word (no FIN, no RST) would hold the watch forever: the server sends a bookmark
    // about every minute, so a watch silent for WATCH_IDLE_MS is abandoned (and resumed by the caller).
    const idle = new AbortController();
    const onAbort = () => idle.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    let timer = setTimeout(
      () => idle.abort(new Error(`watch ${path}: no data for ${WATCH_IDLE_MS / 1000} s`)),
      WATCH_IDLE_MS,
    );
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(
        () => idle.abort(new Error(`watch ${path}: no data for ${WATCH_IDLE_MS / 1000} s`)),
        WATCH_IDLE_MS,
      );
    };
    try {
      await this.#watchStream(path, query, headers, onEvent, idle.signal, alive);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    }
  }

  async #watchStream(
    path: string,
    query: RequestOptions["query"],
    headers: Record<string, string>,
    onEvent: (type: WatchEventType, object: KubeObject) => void,
    signal: AbortSignal,
    alive: () => void,
  ): Promise<void> {
    const res = await request(this.#url(path, { ...query, watch: true }), {
      method: "GET",
      headers,
      dispatcher: this.#agent,
      signal,
    });
    if (res.statusCode >= 300) throw apiError(res.statusCode, await res.body.text(), `watch ${path}`);
    let buffered = "";
    res.body.setEncoding("utf8");
    for await (const chunk of res.body as AsyncIterable<string>) {
      alive();
      buffered += chunk;
      let nl = buffered.indexOf("\n");
      while (nl >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        nl = buffered.indexOf("\n");
        if (line.trim() === "") continue;
        const event = JSON.parse(line) as { type: WatchEventType; object: KubeObject };
        if (event.type === "ERROR") {
          const status = event.object as unknown as { code?: number; reason?: string; message?: string };
          throw new KubeApiError(status.code ?? 500, status.reason ?? "", `watch ${path}: ${status.message ?? ""}`);
        }
        onEvent(event.type, event.object);
      }
    }
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}

interface Credentials {
  readonly headers: Record<string, string>;
  readonly ca?: HttpsRequestOptions["ca"];
  readonly cert?: HttpsRequestOptions["cert"];
  readonly key?: HttpsRequestOptions["key"];
  readonly rejectUnauthorized?: boolean;
  readonly servername?: string;
}

async function credentials(kc: KubeConfig): Promise<Credentials> {
  const o: HttpsRequestOptions = {};
  await kc.applyToHTTPSOptions(o);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(o.headers ?? {})) if (typeof v === "string") headers[k.toLowerCase()] = v;
  return {
    headers,
    ...(o.ca !== undefined ? { ca: o.ca } : {}),
    ...(o.cert !== undefined ? { cert: o.cert } : {}),
    ...(o.key !== undefined ? { key: o.key } : {}),
    ...(o.rejectUnauthorized !== undefined ? { rejectUnauthorized: o.rejectUnauthorized } : {}),
    ...(o.servername !== undefined ? { servername: o.servername } : {}),
  };
}

function apiError(status: number, text: string, what: string): KubeApiError {
  let reason = "";
  let message = text.slice(0, 2000);
  try {
    const s = JSON.parse(text) as { reason?: string; message?: string };
    reason = s.reason ?? "";
    message = s.message ?? message;
  } catch {
    // Not a Status object: keep the text.
  }
  return new KubeApiError(status, reason, `${what}: ${status} ${reason}: ${message}`);
}

/** The REST path of a kind's collection, or of one object (name) or its subresource. */
export function resourcePath(
  r: { readonly group: string; readonly version: string; readonly plural: string },
  namespace?: string,
  name?: string,
  subresource?: string,
): string {
  const base = r.group === "" ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns = namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  const obj = name !== undefined ? `/${encodeURIComponent(name)}` : "";
  const sub = subresource !== undefined ? `/${subresource}` : "";
  return `${base}${ns}/${r.plural}${obj}${sub}`;
}
