// A one-listener Gateway served by a real `sluice serve` and Envoy, for end-to-end tests of policies.

import { freePort, request, waitFor } from "./net.js";
import { type SluiceProcess, startSluice, startTestEnvoy, type TestEnvoy, tempConfigDir } from "./processes.js";

export interface TestGateway {
  /** The Gateway's HTTP port on 127.0.0.1. */
  readonly port: number;
  readonly sluice: SluiceProcess;
  readonly envoy: TestEnvoy;
  stop(): Promise<void>;
}

/** Gateway `default/gw` with one HTTP listener on 127.0.0.1:`port`, the shape most end-to-end tests start from. */
export function gatewayYaml(port: number): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${port} }]
`;
}

/** A GwPolicy `name` on HTTPRoute `route` (on its rule `rule`, if given) with `section` (`spec`: YAML indented by 4). */
function routePolicy(name: string, route: string, section: "traffic" | "backend", spec: string, rule?: string): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: ${route}${rule !== undefined ? `, sectionName: ${rule}` : ""} }]
  ${section}:
${spec}`;
}

/**
 * A GwPolicy `name` whose `traffic` (YAML, indented here) applies to the rule called `name` of HTTPRoute `route`
 * (`r` unless named).
 */
export function rulePolicy(name: string, traffic: string, route = "r"): string {
  const spec = traffic
    .trim()
    .split("\n")
    .map((l) => `    ${l}`)
    .join("\n");
  return routePolicy(name, route, "traffic", `${spec}\n`, name);
}

/** A GwPolicy `name` (default `telemetry`) on Gateway `gw` with a `frontend` section (`frontend`: YAML indented by 4). */
export function frontendPolicy(frontend: string, name = "telemetry"): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
${frontend}`;
}

/** A GwModel `name` on Gateway `gw`; `spec`: the lines of its spec besides parentRefs (indented here). */
export function gwModelYaml(name: string, spec: string): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwModel
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
${spec
  .trim()
  .split("\n")
  .map((l) => `  ${l}`)
  .join("\n")}
`;
}

/**
 * HTTPRoute `probe`: `/probe` answers a redirect (not 404), so that a test whose other routes answer only particular
 * requests can see Envoy ready (startLlmEnv's `probePath`).
 */
export const PROBE_ROUTE = `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: probe, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: Exact, value: /probe } }]
      filters: [{ type: RequestRedirect, requestRedirect: { path: { type: ReplaceFullPath, replaceFullPath: /x } } }]
`;

/**
 * A GwPolicy `name` on Service `service`; `backend`: the lines under `backend:`, as they stand in the document
 * (indented by 4).
 */
export function servicePolicy(service: string, backend: string, name = service): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: "", kind: Service, name: ${service} }]
  backend:
${backend}
`;
}

/**
 * HTTPRoute `r` (or `opts.name`) on Gateway `gw` with a rule per name, sending requests under `/<name>` to Service
 * `<name>` port 80, or with `to: "GwBackend"` to the GwBackend `<name>`;
 * rules of other shapes can follow it (indented by 4, as in the document).
 */
export function prefixRoute(
  names: readonly string[],
  opts: { readonly name?: string; readonly to?: "Service" | "GwBackend" } = {},
): string {
  const ref = (n: string) =>
    opts.to === "GwBackend" ? `{ group: sluice.dev, kind: GwBackend, name: ${n} }` : `{ name: ${n}, port: 80 }`;
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${opts.name ?? "r"}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${names.map((n) => `    - matches: [{ path: { type: PathPrefix, value: /${n} } }]\n      backendRefs: [${ref(n)}]`).join("\n")}
`;
}

/**
 * HTTPRoute `route` (default `r`) on Gateway `gw` with a rule per `[rule, backend]`: named `rule` (for a GwPolicy's
 * sectionName, see ruleBackendPolicy), sending `/<rule>` to GwBackend `backend`.
 */
export function gwBackendRulesRoute(rules: readonly (readonly [string, string])[], route = "r"): string {
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${route}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${rules
  .map(
    ([rule, backend]) => `    - name: ${rule}
      matches: [{ path: { type: PathPrefix, value: /${rule} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${backend} }]
`,
  )
  .join("")}`;
}

/**
 * HTTPRoute `name` on Gateway `gw`, sending `/<name>` to GwBackend `backend` (a YAML document from `---`).
 * `opts.rewrite` (e.g. `/v1`): the rule matches `/<name><rewrite>` and gives the backend `<rewrite>`, the prefix
 * removed; `opts.rule`: the rule's name, for a GwPolicy's sectionName (see rulePolicy).
 */
export function gwBackendRoute(
  name: string,
  backend: string,
  opts: { readonly rewrite?: string; readonly rule?: string } = {},
): string {
  const rewrite =
    opts.rewrite === undefined
      ? ""
      : `      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: ${opts.rewrite} } } }]\n`;
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - ${opts.rule !== undefined ? `name: ${opts.rule}\n      ` : ""}matches: [{ path: { type: PathPrefix, value: /${name}${opts.rewrite ?? ""} } }]
${rewrite}      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${backend} }]
`;
}

/** A GwPolicy `name` on the rule called `rule` of HTTPRoute `r` with a `backend` section (`spec`: YAML indented by 4). */
export function ruleBackendPolicy(name: string, rule: string, spec: string): string {
  return routePolicy(name, "r", "backend", spec, rule);
}

/** A GwPolicy `name` targeting HTTPRoute `route` with a `traffic` section (`spec`: YAML indented by 4). */
export function routeTrafficPolicy(name: string, route: string, spec: string): string {
  return routePolicy(name, route, "traffic", spec);
}

/** A GwPolicy `name` targeting HTTPRoute `route` with a `backend` section (`spec`: YAML indented by 4). */
export function routeBackendPolicy(name: string, route: string, spec: string): string {
  return routePolicy(name, route, "backend", spec);
}

/**
 * A Service `name` (port 80) whose endpoints are 127.0.0.1 at each of `ports` (one EndpointSlice each, as the ports
 * differ); `appProtocol` e.g. `kubernetes.io/h2c`.
 */
export function localService(name: string, ports: number | readonly number[], appProtocol?: string): string {
  const slices = (typeof ports === "number" ? [ports] : ports).map(
    (port, i) => `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-${i + 1}, namespace: default, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: p, port: ${port} }]
endpoints: [{ addresses: [127.0.0.1] }]
`,
  );
  return `---
apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: default }
spec: { ports: [{ name: p, port: 80${appProtocol !== undefined ? `, appProtocol: ${appProtocol}` : ""} }] }
${slices.join("")}`;
}

/**
 * Starts Sluice with a Gateway `gw` (one HTTP listener) plus `resources`, and an Envoy; waits until `readyPath` answers.
 * `sluiceArgs`: more arguments to `sluice serve`.
 */
export async function startTestGateway(
  resources: (port: number) => string,
  readyPath: string,
  ready: (status: number) => boolean = (s) => s !== 404,
  sluiceArgs: readonly string[] = [],
): Promise<TestGateway> {
  const cfg = tempConfigDir();
  const port = await freePort();
  cfg.write("gw.yaml", `${gatewayYaml(port)}${resources(port)}`);
  const sluice = await startSluice("serve", cfg.dir, { extraArgs: [...sluiceArgs] });
  let envoy: TestEnvoy | undefined;
  try {
    envoy = await startTestEnvoy(sluice);
    await waitFor(
      "the gateway to serve",
      async () => (ready((await request(port, readyPath)).status) ? true : undefined),
      20_000,
    );
  } catch (e) {
    await envoy?.stop();
    await sluice.stop();
    cfg.cleanup();
    throw e;
  }
  const started = envoy;
  return {
    port,
    sluice,
    envoy: started,
    async stop() {
      await started.stop();
      await sluice.stop();
      cfg.cleanup();
    },
  };
}
