// The mixed load of the fault tests (test/e2e/faults-sluice.test.ts) and the soak (bench/soak.ts): one Gateway with
// plain routing, native JWT authorization (Envoy's jwt_authn + RBAC), Sluice's ext_authz (a CEL rule only Sluice can
// evaluate), an LLM backend (buffered and streamed through the LLM ext_proc, official `openai` client) and an MCP
// backend (official MCP SDK client, one session). Each request kind checks its answer, a denial included: a rule that
// failed open would be an error.

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import OpenAI from "openai";
import { type FaultProvider, startFaultProvider } from "./fault-provider.js";
import { gatewayYaml, rulePolicy } from "./gateway.js";
import { mcpYaml } from "./mcp-env.js";
import { type SdkTarget, startSdkTarget } from "./mcp-targets.js";
import { request } from "./net.js";

export const KINDS = ["plain", "jwt", "jwt-denied", "cel", "cel-denied", "llm", "llm-stream", "mcp"] as const;
export type Kind = (typeof KINDS)[number];

const ISSUER = "https://issuer.faults.test";
const PROVIDER_KEY = "sk-mixed-provider";

export interface MixedPeers {
  /** An echo upstream that waits `x-delay` ms before answering. */
  readonly upstream: { readonly port: number; readonly server: Server };
  readonly provider: FaultProvider;
  readonly mcp: SdkTarget;
  /** A token for `sub: alice`, which the JWT rule allows. */
  readonly token: string;
  readonly jwks: string;
  close(): Promise<void>;
}

export async function startMixedPeers(): Promise<MixedPeers> {
  const { publicKey, privateKey } = await generateKeyPair("RS256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  const token = await new SignJWT({ sub: "alice" })
    .setProtectedHeader({ alg: "RS256", kid: "k1" })
    .setIssuer(ISSUER)
    .setIssuedAt()
    .setExpirationTime("2h")
    .sign(privateKey);
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const delay = Number(req.headers["x-delay"] ?? "0");
      const answer = () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ upstream: "echo", path: req.url }));
      };
      if (delay > 0) setTimeout(answer, delay);
      else answer();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const provider = await startFaultProvider({ name: "mixed", apiKey: PROVIDER_KEY });
  const mcp = await startSdkTarget("alpha");
  return {
    upstream: { port: (server.address() as AddressInfo).port, server },
    provider,
    mcp,
    token,
    jwks: JSON.stringify({ keys: [jwk] }),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await provider.close();
      await mcp.kill();
    },
  };
}

/** Everything but the churn file: the Gateway on `port` and the routes of every kind. */
export function mixedYaml(port: number, p: MixedPeers): string {
  const rule = (name: string) => `
    - name: ${name}
      matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }]`;
  return `${gatewayYaml(port)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: echo, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${p.upstream.port} } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("plain")}${rule("jwt")}${rule("cel")}
${rulePolicy(
  "jwt",
  `jwtAuthentication: { mode: Strict, providers: [{ issuer: "${ISSUER}", jwks: { inline: ${JSON.stringify(p.jwks)} } }] }
authorization: { action: Allow, policy: { matchExpressions: ["jwt.sub == 'alice'"] } }`,
)}${rulePolicy("cel", `authorization: { action: Allow, policy: { matchExpressions: ["request.query['n'].size() > 2"] } }`)}---
apiVersion: v1
kind: Secret
metadata: { name: llm-keys, namespace: default }
stringData: { key: ${PROVIDER_KEY} }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    provider:
      providerA: {}
      host: 127.0.0.1
      port: ${p.provider.port}
  policies:
    auth: { secretRef: { name: llm-keys, key: key } }
    ai:
      routes:
        /v1/chat/completions: Completions
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /llm } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
${mcpYaml([{ name: "tools", targets: [{ name: "alpha", port: p.mcp.port }] }])}`;
}

/** A route whose answer carries `x-generation: <n>`: the file rewritten once per configuration change. */
export function churnYaml(generation: number): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: churn, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /churn } }]
      filters:
        - type: ResponseHeaderModifier
          responseHeaderModifier: { set: [{ name: x-generation, value: "${generation}" }] }
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }]
`;
}

export interface Outcome {
  readonly kind: Kind;
  /** The answer the kind expects (a denial for the *-denied kinds). */
  readonly ok: boolean;
  /** HTTP status, or the client's error class and message. */
  readonly got: string;
  /** The HTTP status where there was one (0: none). */
  readonly status: number;
  readonly ms: number;
}

export interface MixedClient {
  /** One request of `kind`; `delayMs`: the upstream (echo, provider or MCP tool) takes that long. */
  run(kind: Kind, delayMs?: number): Promise<Outcome>;
  /** A fresh MCP session (the previous one is left as it is). */
  reconnectMcp(): Promise<void>;
  close(): Promise<void>;
}

function describeError(e: unknown): { got: string; status: number } {
  // openai's APIError has `status`; the MCP SDK's StreamableHTTPError has the HTTP status as `code`.
  const err = e as Error & { status?: number; code?: unknown };
  const status =
    typeof err.status === "number"
      ? err.status
      : err.constructor.name === "StreamableHTTPError" && typeof err.code === "number"
        ? err.code
        : 0;
  return { got: `${err.constructor.name}${status ? ` ${status}` : ""}: ${err.message.slice(0, 160)}`, status };
}

export async function mixedClient(baseUrl: string, port: number, p: MixedPeers): Promise<MixedClient> {
  const openai = new OpenAI({ apiKey: "client-key", baseURL: `${baseUrl}/llm/v1`, maxRetries: 0, timeout: 20_000 });
  let mcp: { client: Client; transport: StreamableHTTPClientTransport } | undefined;
  const connectMcp = async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/tools/mcp`), {
      reconnectionOptions: {
        initialReconnectionDelay: 200,
        maxReconnectionDelay: 1000,
        reconnectionDelayGrowFactor: 1.5,
        maxRetries: 0,
      },
    });
    const client = new Client({ name: "mixed", version: "1.0.0" });
    await client.connect(transport);
    mcp = { client, transport };
  };
  await connectMcp();
  const http = async (kind: Kind, path: string, expect: number, headers: Record<string, string>): Promise<Outcome> => {
    const t0 = performance.now();
    try {
      const r = await request(port, path, { headers, timeoutMs: 20_000 });
      const ok = r.status === expect && (expect !== 200 || r.body.includes('"upstream":"echo"'));
      return { kind, ok, got: String(r.status), status: r.status, ms: performance.now() - t0 };
    } catch (e) {
      return { kind, ok: false, ...describeError(e), ms: performance.now() - t0 };
    }
  };
  return {
    async run(kind, delayMs = 0) {
      const delay: Record<string, string> = delayMs > 0 ? { "x-delay": String(delayMs) } : {};
      const llmText = delayMs > 0 ? `slow ${delayMs}` : "hi";
      const t0 = performance.now();
      switch (kind) {
        case "plain":
          return http(kind, "/plain", 200, delay);
        case "jwt":
          return http(kind, "/jwt", 200, { ...delay, authorization: `Bearer ${p.token}` });
        case "jwt-denied":
          return http(kind, "/jwt", 401, delay);
        case "cel":
          return http(kind, "/cel?n=abc", 200, delay);
        case "cel-denied":
          return http(kind, "/cel?n=a", 403, delay);
        case "llm":
          try {
            const r = await openai.chat.completions.create({
              model: "gpt-4o-mini",
              messages: [{ role: "user", content: llmText }],
            });
            const text = r.choices[0]?.message.content ?? "";
            return {
              kind,
              ok: text === `Hello from mixed: ${llmText}`,
              got: "200",
              status: 200,
              ms: performance.now() - t0,
            };
          } catch (e) {
            return { kind, ok: false, ...describeError(e), ms: performance.now() - t0 };
          }
        case "llm-stream":
          try {
            const s = await openai.chat.completions.create({
              model: "gpt-4o-mini",
              messages: [{ role: "user", content: llmText }],
              stream: true,
            });
            let text = "";
            for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
            return {
              kind,
              ok: text === `Hello from mixed: ${llmText}`,
              got: "200",
              status: 200,
              ms: performance.now() - t0,
            };
          } catch (e) {
            return { kind, ok: false, ...describeError(e), ms: performance.now() - t0 };
          }
        case "mcp":
          try {
            if (mcp === undefined) await connectMcp();
            const r = (await mcp?.client.callTool(
              delayMs > 0
                ? { name: "slow", arguments: { steps: 1, ms: delayMs } }
                : { name: "echo", arguments: { text: "hi" } },
              undefined,
              { timeout: 20_000 },
            )) as { content?: { text?: string }[] } | undefined;
            const text = r?.content?.[0]?.text ?? "";
            const ok = delayMs > 0 ? text === "alpha done after 1" : text === "alpha: hi";
            return { kind, ok, got: ok ? "200" : text, status: ok ? 200 : 0, ms: performance.now() - t0 };
          } catch (e) {
            return { kind, ok: false, ...describeError(e), ms: performance.now() - t0 };
          }
      }
    },
    async reconnectMcp() {
      await mcp?.transport.close().catch(() => {});
      mcp = undefined;
      await connectMcp();
    },
    async close() {
      await mcp?.client.close().catch(() => {});
    },
  };
}
