// Loopback helpers for end-to-end tests: free ports, echo upstreams, HTTP requests, waiting.

import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo, Socket as NetSocket } from "node:net";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Duplex, duplexPair } from "node:stream";

const RESERVED_PORTS = join(tmpdir(), "sluice-test-ports");
/** How long a port handed out stays reserved for the process that got it (longer than any test file runs). */
const RESERVATION_MS = 15 * 60_000;

/** Claims `port` for this process among the test processes running at once; false when another one holds it. */
function reserve(port: number): boolean {
  mkdirSync(RESERVED_PORTS, { recursive: true });
  const file = join(RESERVED_PORTS, String(port));
  try {
    writeFileSync(file, String(process.pid), { flag: "wx" });
    return true;
  } catch {
    try {
      if (Date.now() - statSync(file).mtimeMs < RESERVATION_MS) return false;
      writeFileSync(file, String(process.pid));
      return true;
    } catch {
      return false;
    }
  }
}

/** The kernel's range for ports it picks itself (bind to port 0, outgoing connections). */
function ephemeralRange(): readonly [number, number] {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (low !== undefined && high !== undefined && low > 0 && high >= low) return [low, high];
  } catch {
    // not Linux: the usual default
  }
  return [32768, 60999];
}

/** Ports handed out for Envoy listeners and servers started with a fixed port: below the ephemeral range. */
const [EPHEMERAL_LOW] = ephemeralRange();
const POOL_LOW = 20_000;
const POOL_HIGH = Math.max(POOL_LOW + 1000, EPHEMERAL_LOW - 1);

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createNetServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/**
 * A port free right now on 127.0.0.1, for a process that binds it later (Envoy's listeners and admin, servers given a
 * port). Test files run in parallel, so two things must not happen between now and that bind:
 * - another test process is handed the same port: each port is reserved (a file per port) for some minutes. Envoy
 *   listens with SO_REUSEPORT, so two gateways on one port would share its connections without an error;
 * - the kernel gives the port to a server that binds port 0 or to an outgoing connection: the port is taken below the
 *   kernel's ephemeral range, where it never picks one itself.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = POOL_LOW + Math.floor(Math.random() * (POOL_HIGH - POOL_LOW));
    if (!(await canBind(port))) continue;
    if (reserve(port)) return port;
    if (attempt > 10_000) throw new Error("no free port below the ephemeral range");
  }
}

export interface EchoBody {
  readonly upstream: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

export interface Upstream {
  readonly name: string;
  readonly port: number;
  readonly requests: EchoBody[];
  close(): Promise<void>;
}

/** An HTTP server that answers every request with a JSON echo of it, naming itself. */
export async function startEchoUpstream(name: string, port = 0, host = "127.0.0.1"): Promise<Upstream> {
  const requests: EchoBody[] = [];
  // Headers up to 256 KiB, more than Envoy passes by default: a large request reaches the upstream whole.
  const server: Server = createServer({ maxHeaderSize: 256 * 1024 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const echo: EchoBody = {
        upstream: name,
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      requests.push(echo);
      res.writeHead(200, { "content-type": "application/json", "x-upstream": name });
      res.end(JSON.stringify(echo));
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(port, host, r));
  return {
    name,
    port: (server.address() as AddressInfo).port,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export interface HttpResult {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** One HTTP/1.1 request on a fresh connection (no pooling, so each request sees the current config). */
export function request(
  port: number,
  path: string,
  opts: { method?: string; headers?: Record<string, string | string[]>; body?: string; timeoutMs?: number } = {},
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port,
        path,
        method: opts.method ?? "GET",
        headers: { connection: "close", ...(opts.headers ?? {}) },
        agent: false,
        timeout: opts.timeoutMs ?? 5000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }),
        );
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`request to :${port}${path} timed out`)));
    req.on("error", reject);
    req.end(opts.body);
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 15_000,
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (e) {
      lastError = e;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ""}`);
}

/**
 * A TCP server on 127.0.0.1 (port 0) that reads each connection's first bytes and hands the connection, as a stream
 * that starts with them, to `dispatch` (to tell TLS from cleartext, or HTTP/2's preface from HTTP/1.1). `listen()`
 * resolves with the port.
 */
export function firstBytesServer(dispatch: (first: Buffer, stream: Duplex) => void): {
  listen(): Promise<number>;
  close(): void;
} {
  const sockets = new Set<NetSocket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.once("data", (first: Buffer) => {
      // The handler gets a stream of its own that starts with the bytes read here (an HTTP/2 server reads a socket's
      // handle, past anything unshifted).
      const [ours, theirs] = duplexPair();
      ours.write(first);
      socket.pipe(ours).pipe(socket);
      socket.on("close", () => ours.destroy());
      dispatch(first, theirs);
    });
  });
  return {
    async listen() {
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      return (server.address() as AddressInfo).port;
    },
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/**
 * Starts `server` on an ephemeral loopback port: the port, and a close that ends the connections it still holds (an
 * Envoy keeps its upstream connections open) before the server.
 */
export async function listenLoopback(server: Server): Promise<{ port: number; close: () => Promise<void> }> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
