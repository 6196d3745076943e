// Resolving backendRefs (Service or GwBackend) to clusters, with ReferenceGrant checks across namespaces.

import type { BackendObjectReference } from "../../api/gateway-api.js";
import { namespaceOf } from "../../api/resource.js";
import type { TranslationInput } from "../input.js";
import type { ClusterIR, EndpointIR } from "../ir.js";
import { findNamed, slicesOfService } from "../lookup.js";
import {
  backendClusterName,
  http2ClusterName,
  inferencePoolClusterName,
  mcpClusterName,
  serviceClusterName,
} from "../names.js";
import { RouteConditionReason } from "../status/conditions.js";
import { resolveBackendTls } from "../xds/backend-tls.js";
import { agentCoreConnection, resolveAgentCore } from "./agent-core.js";
import { type AiBackendRefs, resolveInferencePool, translateAiBackend } from "./ai.js";
import type { TunnelRefs } from "./tunnel.js";

export type ResolvedBackend =
  | { readonly ok: true; readonly cluster: ClusterIR }
  | { readonly ok: false; readonly reason: string; readonly message: string };

const H2_APP_PROTOCOLS = new Set(["kubernetes.io/h2c", "h2c", "grpc", "http2"]);
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

export function isIpAddress(host: string): boolean {
  return IPV4.test(host) || host.includes(":");
}

/** Whether a ReferenceGrant in `toNamespace` lets `fromKind` objects in `fromNamespace` refer to the target. */
export function referenceAllowed(
  input: TranslationInput,
  from: { group: string; kind: string; namespace: string },
  to: { group: string; kind: string; namespace: string; name: string },
): boolean {
  if (from.namespace === to.namespace) return true;
  return input.referenceGrants.some(
    (g) =>
      namespaceOf(g) === to.namespace &&
      g.spec.from.some((f) => f.group === from.group && f.kind === from.kind && f.namespace === from.namespace) &&
      g.spec.to.some((t) => t.group === to.group && t.kind === to.kind && (t.name === undefined || t.name === to.name)),
  );
}

export type ServiceEndpoints =
  | {
      readonly ok: true;
      readonly port: number;
      /** IP endpoints (sorted), ready or not. */
      readonly endpoints: readonly EndpointIR[];
      /** The first FQDN endpoint of a slice with addressType FQDN, if any. */
      readonly fqdn?: { readonly host: string; readonly port: number };
      /** The Service port's appProtocol asks for HTTP/2. */
      readonly http2: boolean;
    }
  | { readonly ok: false; readonly message: string };

/** Lookups of a tunnel's proxy in namespace `ns`; nothing is found without an input (unit tests of the IR). */
export function tunnelRefs(input: TranslationInput | undefined, ns: string): TunnelRefs {
  return {
    service: (name, port) =>
      input === undefined
        ? { ok: false, message: `Service ${ns}/${name} not found` }
        : serviceEndpoints(input, ns, name, port),
    gwBackendStatic: (name) => {
      const be = input === undefined ? undefined : findNamed(input.backends, ns, name);
      if (be === undefined) return undefined;
      return be.spec.static ?? "not-static";
    },
  };
}

/** The endpoints of one port of a Service, from its EndpointSlices (the Service port is mapped to the target port). */
export function serviceEndpoints(
  input: TranslationInput,
  namespace: string,
  name: string,
  servicePort: number | undefined,
): ServiceEndpoints {
  const svc = findNamed(input.services, namespace, name);
  if (svc === undefined) return { ok: false, message: `Service ${namespace}/${name} not found` };
  if (servicePort === undefined)
    return { ok: false, message: `backendRef to Service ${namespace}/${name} needs a port` };
  const port = svc.spec.ports?.find((p) => p.port === servicePort);
  if (port === undefined) return { ok: false, message: `Service ${namespace}/${name} has no port ${servicePort}` };
  const http2 = port.appProtocol !== undefined && H2_APP_PROTOCOLS.has(port.appProtocol);
  const endpoints: EndpointIR[] = [];
  let fqdn: { host: string; port: number } | undefined;
  for (const slice of slicesOfService(input.endpointSlices, namespace, name)) {
    // The slice port carrying this Service port has the same name; an unnamed Service port matches an unnamed one.
    const slicePort = slice.ports?.find((p) => (p.name ?? "") === (port.name ?? ""));
    const targetPort =
      slicePort?.port ?? (typeof port.targetPort === "number" ? port.targetPort : slice.ports ? undefined : port.port);
    if (targetPort === undefined) continue;
    for (const ep of slice.endpoints ?? []) {
      const ready = ep.conditions?.ready ?? true;
      for (const address of ep.addresses) {
        if (slice.addressType === "FQDN") fqdn ??= { host: address, port: targetPort };
        else endpoints.push({ address, port: targetPort, ready });
      }
    }
  }
  endpoints.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : a.port - b.port));
  return { ok: true, port: servicePort, endpoints, ...(fqdn !== undefined ? { fqdn } : {}), http2 };
}

/** One traced resolution. */
export interface Resolution {
  /** The resolution cache key of ref, from and opts. */
  readonly key: string;
  readonly ref: BackendObjectReference;
  readonly from: { group: string; kind: string; namespace: string };
  readonly opts: { readonly http2?: boolean };
  readonly seen: string;
}

/**
 * What route translation reads from a resolution: the cluster name and, for AI backends, the number of providers
 * (retries), whether it is an agent runtime, or the reason and message of a failure. Endpoints are not part of it: they change clusters, not routes.
 */
function routeView(r: ResolvedBackend): string {
  if (!r.ok) return `error|${r.reason}|${r.message}`;
  const c = r.cluster;
  // An agent runtime's routes have no default timeout (httproute.ts).
  const core = (c.kind === "dns" || c.kind === "static") && c.agentCore !== undefined ? "|agentCore" : "";
  return `ok|${c.name}|${c.kind === "llm" ? c.groups.flat().length : ""}${core}`;
}

export class BackendResolver {
  readonly #clusters = new Map<string, ClusterIR>();
  /** Resolutions so far: many routes name the same backend, and its cluster is built once. */
  readonly #resolved = new Map<string, ResolvedBackend>();

  /**
   * `gateway`: `namespace/name` of the Gateway whose routes resolve here (MCP backends are reached per Gateway).
   * `agentCoreEndpoint`: the agent runtime endpoint override of the Sluice process (backend/agent-core.ts).
   */
  constructor(
    private readonly input: TranslationInput,
    private readonly gateway = "",
    private readonly agentCoreEndpoint?: string,
  ) {}

  /** Every cluster resolved so far, sorted by name. */
  clusters(): ClusterIR[] {
    return [...this.#clusters.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** `http2`: the caller speaks gRPC, so the cluster must use HTTP/2 even when the Service does not say so. */
  resolve(
    ref: BackendObjectReference,
    from: { group: string; kind: string; namespace: string },
    opts: { readonly http2?: boolean } = {},
  ): ResolvedBackend {
    const group = ref.group ?? "";
    const kind = ref.kind ?? "Service";
    const namespace = ref.namespace ?? from.namespace;
    const key = `${group}|${kind}|${namespace}|${ref.name}|${ref.port ?? ""}|${from.group}|${from.kind}|${from.namespace}|${opts.http2 === true}`;
    const result = this.#resolveKeyed(key, ref, from, opts);
    if (this.#trace !== undefined) {
      // Equal keys resolve alike: the first resolution of a key stands for all (memo entries stay small).
      let resolution = this.#resolutions.get(key);
      if (resolution === undefined) {
        resolution = { key, ref, from, opts, seen: routeView(result) };
        this.#resolutions.set(key, resolution);
      }
      this.#trace.push(resolution);
    }
    return result;
  }

  readonly #resolutions = new Map<string, Resolution>();

  #resolveKeyed(
    key: string,
    ref: BackendObjectReference,
    from: { group: string; kind: string; namespace: string },
    opts: { readonly http2?: boolean },
  ): ResolvedBackend {
    let result = this.#resolved.get(key);
    if (result === undefined) {
      result = this.#resolve(ref, from, opts);
      this.#resolved.set(key, result);
    }
    if (result.ok) this.#clusters.set(result.cluster.name, result.cluster);
    return result;
  }

  /** Resolves traced references again only to register their clusters, when they are known to resolve the same. */
  register(trace: readonly Resolution[]): true {
    for (const r of trace) this.#resolveKeyed(r.key, r.ref, r.from, r.opts);
    return true;
  }

  // ---- Tracing, for the translation memo: the references one route resolved, and what the route saw of each.

  #trace: Resolution[] | undefined;

  startTrace(): void {
    this.#trace = [];
  }

  stopTrace(): readonly Resolution[] {
    const trace = this.#trace ?? [];
    this.#trace = undefined;
    return trace;
  }

  /**
   * Resolves traced references again, registering their clusters as the first resolution did; false as soon as one
   * resolves to something a route would see differently (another cluster name, an error, other AI providers).
   */
  resolvesSame(trace: readonly Resolution[]): boolean {
    for (const r of trace) if (routeView(this.resolve(r.ref, r.from, r.opts)) !== r.seen) return false;
    return true;
  }

  #resolve(
    ref: BackendObjectReference,
    from: { group: string; kind: string; namespace: string },
    opts: { readonly http2?: boolean },
  ): ResolvedBackend {
    const group = ref.group ?? "";
    const kind = ref.kind ?? "Service";
    const namespace = ref.namespace ?? from.namespace;
    if (!referenceAllowed(this.input, from, { group, kind, namespace, name: ref.name })) {
      return {
        ok: false,
        reason: RouteConditionReason.RefNotPermitted,
        message: `${kind} ${namespace}/${ref.name} is in another namespace and no ReferenceGrant in ${namespace} allows it`,
      };
    }
    let result: ResolvedBackend;
    if (group === "" && kind === "Service") result = this.#service(namespace, ref);
    else if ((group === "sluice.dev" && kind === "GwBackend") || (group === "" && kind === "Backend")) {
      result = this.#gwBackend(namespace, ref.name);
    } else if (group === "inference.networking.k8s.io" && kind === "InferencePool") {
      result = this.#inferencePool(namespace, ref.name);
    } else {
      result = {
        ok: false,
        reason: RouteConditionReason.InvalidKind,
        message: `backendRef kind ${group === "" ? "" : `${group}/`}${kind} is not supported; use a Service, a sluice.dev GwBackend or an inference.networking.k8s.io InferencePool`,
      };
    }
    // LLM clusters speak each provider's own protocol; gRPC does not go to them.
    if (
      result.ok &&
      opts.http2 === true &&
      !result.cluster.http2 &&
      result.cluster.kind !== "llm" &&
      result.cluster.kind !== "mcp"
    ) {
      // A twin cluster, so the same backend can also serve HTTP/1 routes.
      result = { ok: true, cluster: { ...result.cluster, name: http2ClusterName(result.cluster.name), http2: true } };
    }
    return result;
  }

  #service(namespace: string, ref: BackendObjectReference): ResolvedBackend {
    const r = serviceEndpoints(this.input, namespace, ref.name, ref.port);
    if (!r.ok) return { ok: false, reason: RouteConditionReason.BackendNotFound, message: r.message };
    const name = serviceClusterName(namespace, ref.name, r.port);
    if (r.fqdn !== undefined && r.endpoints.length === 0) {
      return { ok: true, cluster: { kind: "dns", name, host: r.fqdn.host, port: r.fqdn.port, http2: r.http2 } };
    }
    return { ok: true, cluster: { kind: "eds", name, endpoints: r.endpoints, http2: r.http2 } };
  }

  /** What AI backends and InferencePools of `namespace` refer to: Services, pools, tunnel proxies. */
  #refs(namespace: string): AiBackendRefs {
    return {
      service: (svc, port) => serviceEndpoints(this.input, namespace, svc, port),
      inferencePool: (pool) => findNamed(this.input.inferencePools, namespace, pool),
      pods: () => this.input.pods.filter((p) => namespaceOf(p) === namespace),
      tunnel: tunnelRefs(this.input, namespace),
      tls: (value, host) => resolveBackendTls(value, namespace, host, this.input),
    };
  }

  /** An InferencePool: its endpoint picker chooses the model server per request (filters/inference-pool.ts). */
  #inferencePool(namespace: string, name: string): ResolvedBackend {
    const r = resolveInferencePool(name, namespace, this.#refs(namespace), `InferencePool ${namespace}/${name}`);
    if (!r.ok) return { ok: false, reason: RouteConditionReason.BackendNotFound, message: r.message };
    return {
      ok: true,
      cluster: { kind: "pool", name: inferencePoolClusterName(namespace, name), pool: r.pool, http2: false },
    };
  }

  #gwBackend(namespace: string, name: string): ResolvedBackend {
    const be = findNamed(this.input.backends, namespace, name);
    if (be === undefined) {
      return {
        ok: false,
        reason: RouteConditionReason.BackendNotFound,
        message: `GwBackend ${namespace}/${name} not found`,
      };
    }
    const clusterName = backendClusterName(namespace, name);
    const s = be.spec.static;
    if (s !== undefined) {
      if (s.unixPath !== undefined) {
        return { ok: true, cluster: { kind: "unix", name: clusterName, path: s.unixPath, http2: false } };
      }
      if (s.host !== undefined && s.port !== undefined) {
        if (isIpAddress(s.host)) {
          return {
            ok: true,
            cluster: {
              kind: "static",
              name: clusterName,
              endpoints: [{ address: s.host, port: s.port, ready: true }],
              http2: false,
            },
          };
        }
        return { ok: true, cluster: { kind: "dns", name: clusterName, host: s.host, port: s.port, http2: false } };
      }
    }
    const a2a = be.spec.a2a;
    if (a2a !== undefined) {
      // An agent-to-agent endpoint: an ordinary cluster (JSON-RPC and SSE pass through Envoy as any HTTP does, with
      // the route's and the backend's policies), marked so the agent card is served with the Gateway's address.
      if (isIpAddress(a2a.host)) {
        const endpoints = [{ address: a2a.host, port: a2a.port, ready: true }];
        return { ok: true, cluster: { kind: "static", name: clusterName, endpoints, http2: false, a2a: true } };
      }
      return {
        ok: true,
        cluster: { kind: "dns", name: clusterName, host: a2a.host, port: a2a.port, http2: false, a2a: true },
      };
    }
    if (be.spec.mcp !== undefined) {
      const gateway = this.gateway;
      const backend = `${namespace}/${name}`;
      return {
        ok: true,
        cluster: { kind: "mcp", name: mcpClusterName(gateway, namespace, name), http2: false, gateway, backend },
      };
    }
    if (be.spec.cloudA !== undefined) {
      const r = resolveAgentCore(be.spec.cloudA, `${namespace}/${name}`, this.agentCoreEndpoint);
      if (!r.ok) {
        return {
          ok: false,
          reason: RouteConditionReason.UnsupportedValue,
          message: `GwBackend ${namespace}/${name}: ${r.field}: ${r.message}`,
        };
      }
      const { endpoint, ir } = r;
      const connection = agentCoreConnection(ir, endpoint);
      const cluster: ClusterIR = isIpAddress(endpoint.host)
        ? {
            kind: "static",
            name: clusterName,
            endpoints: [{ address: endpoint.host, port: endpoint.port, ready: true }],
            http2: false,
            agentCore: ir,
            connection,
          }
        : {
            kind: "dns",
            name: clusterName,
            host: endpoint.host,
            port: endpoint.port,
            http2: false,
            agentCore: ir,
            connection,
          };
      return { ok: true, cluster };
    }
    if (be.spec.dynamicForwardProxy !== undefined) {
      return { ok: true, cluster: { kind: "dfp", name: clusterName, http2: false } };
    }
    if (be.spec.ai !== undefined) {
      const r = translateAiBackend(
        clusterName,
        `${namespace}/${name}`,
        be.spec as Readonly<Record<string, unknown>>,
        this.#refs(namespace),
      );
      if (r.ok) return { ok: true, cluster: r.cluster };
      return {
        ok: false,
        reason: RouteConditionReason.UnsupportedValue,
        message: `GwBackend ${namespace}/${name}: ${r.message}`,
      };
    }
    const variant = Object.keys(be.spec).find((k) => k !== "policies") ?? "none";
    return {
      ok: false,
      reason: RouteConditionReason.UnsupportedValue,
      message: `GwBackend ${namespace}/${name}: the ${variant} backend type is not served yet`,
    };
  }
}
