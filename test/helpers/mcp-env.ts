// YAML for MCP end-to-end tests: GwBackends `mcp` over static host targets, each behind a rule of HTTPRoute `mcp`
// whose path prefix is the backend's name; and an SDK client of one of them.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

export interface McpBackendSpec {
  readonly name: string;
  /** Target name → port on 127.0.0.1, with the protocol (default Streamable HTTP). */
  readonly targets: readonly { readonly name: string; readonly port: number; readonly protocol?: "SSE" }[];
  readonly prefixMode?: "Conditional" | "Always" | "Never";
  readonly failureMode?: "FailClosed" | "FailOpen";
  readonly sessionRouting?: "Stateful" | "Stateless";
}

/** `hostnames`: of the HTTPRoute (any host when absent). */
export function mcpYaml(backends: readonly McpBackendSpec[], hostnames?: readonly string[]): string {
  const docs = backends.map(
    (b) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${b.name}, namespace: default }
spec:
  mcp:
    targets:
${b.targets
  .map(
    (t) =>
      `      - { name: ${t.name}, static: { host: 127.0.0.1, port: ${t.port}${t.protocol !== undefined ? `, protocol: ${t.protocol}` : ""} } }`,
  )
  .join("\n")}
${b.prefixMode !== undefined ? `    prefixMode: ${b.prefixMode}\n` : ""}${b.failureMode !== undefined ? `    failureMode: ${b.failureMode}\n` : ""}${b.sessionRouting !== undefined ? `    sessionRouting: ${b.sessionRouting}\n` : ""}`,
  );
  const rules = backends
    .map(
      (b) => `
    - name: ${b.name}
      matches: [{ path: { type: PathPrefix, value: /${b.name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${b.name} }]`,
    )
    .join("");
  return `${docs.join("")}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: mcp, namespace: default }
spec:
  parentRefs: [{ name: gw }]
${
  hostnames !== undefined
    ? `  hostnames: [${hostnames.join(", ")}]
`
    : ""
}  rules:${rules}
`;
}

/** An SDK client of `<baseUrl>/<backend>/mcp`; `sessionId` resumes a session. */
export async function mcpClient(
  baseUrl: string,
  backend: string,
  opts: {
    sessionId?: string;
    capabilities?: Record<string, unknown>;
    connect?: boolean;
    headers?: Record<string, string>;
  } = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/${backend}/mcp`), {
    ...(opts.sessionId !== undefined ? { sessionId: opts.sessionId } : {}),
    ...(opts.headers !== undefined ? { requestInit: { headers: opts.headers } } : {}),
    reconnectionOptions: {
      initialReconnectionDelay: 200,
      maxReconnectionDelay: 1000,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: 2,
    },
  });
  const client = new Client({ name: "e2e", version: "1.0.0" }, { capabilities: opts.capabilities ?? {} });
  if (opts.connect !== false) await client.connect(transport);
  return { client, transport };
}
