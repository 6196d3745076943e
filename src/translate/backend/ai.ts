// GwBackend `ai` → an LLM cluster: priority groups of providers, each with where Envoy connects and what it speaks.
// Credentials and AI request policies are not here: they come from the effective backend policies (llm table).

import { type Pod, podReady } from "../../api/core.js";
import type { InferencePool } from "../../api/gateway-api.js";
import { parseDurationMs } from "../duration.js";
import type { BackendTlsIR, EndpointIR, InferencePoolIR, LlmClusterIR, LlmProviderIR, LlmProviderKind } from "../ir.js";
import { keepaliveSettings } from "../keepalive.js";
import { pickerClusterName } from "../names.js";
import type { ServiceEndpoints } from "./resolve.js";
import { resolveTunnel, TUNNEL_NEEDS_TLS, type TunnelRefs } from "./tunnel.js";

type Rec = Readonly<Record<string, unknown>>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** Vertex AI location of a providerF without `region`, and its host (`global` has no regional prefix). */
const VERTEX_DEFAULT_REGION = "global";
const vertexHost = (region: string) =>
  region === "global" ? "aiplatform.googleapis.com" : `${region}-aiplatform.googleapis.com`;

/** Strips a scheme and trailing slashes (the spec lets users write the Azure endpoint either way). */
export function bareHost(h: string): string {
  return h.replace(/^[a-z]+:\/\//i, "").replace(/\/+$/, "");
}

const VARIANTS: Readonly<Record<string, (s: Rec) => { kind: LlmProviderKind; host: string } | undefined>> = {
  providerA: () => ({ kind: "openai", host: "api.openai.com" }),
  providerB: (s) => {
    const endpoint = str(s.endpoint);
    return endpoint === undefined ? undefined : { kind: "azure-openai", host: bareHost(endpoint) };
  },
  cloudC: (s) => {
    const resource = str(s.resourceName);
    if (resource === undefined) return undefined;
    return s.resourceType === "Foundry"
      ? { kind: "azure-foundry", host: `${resource}.services.ai.azure.com` }
      : { kind: "azure-openai", host: `${resource}.openai.azure.com` };
  },
  providerD: () => ({ kind: "anthropic", host: "api.anthropic.com" }),
  providerE: () => ({ kind: "gemini", host: "generativelanguage.googleapis.com" }),
  // Vertex AI: the location's own host (`global` has none); the project and location also go in every path.
  providerF: (s) =>
    str(s.projectId) === undefined
      ? undefined
      : { kind: "vertex", host: vertexHost(str(s.region) ?? VERTEX_DEFAULT_REGION) },
  providerG: (s) => ({ kind: "bedrock", host: `bedrock-runtime.${str(s.region) ?? "us-east-1"}.amazonaws.com` }),
  custom: () => ({ kind: "custom", host: "" }),
};

export type ProviderResult = { ok: true; provider: LlmProviderIR } | { ok: false; message: string };

/** What an AI backend may refer to in its own namespace (custom providers' backendRef). */
export interface AiBackendRefs {
  /** The endpoints of a Service port (see serviceEndpoints in resolve.ts). */
  service(name: string, port: number | undefined): ServiceEndpoints;
  /** An InferencePool of the namespace. */
  inferencePool?(name: string): InferencePool | undefined;
  /** The Pods of the namespace (an InferencePool with FailOpen falls back on its ready ones). */
  pods?(): readonly Pod[];
  /** Where a `tunnel` policy's proxy is found (the GwBackend's namespace). */
  readonly tunnel?: TunnelRefs;
  /**
   * A `tls` policy toward `host` with its ConfigMaps and Secrets read in the GwBackend's namespace, as a Service's
   * backend.tls is (xds/backend-tls.ts resolveBackendTls); `field` of a failure is relative to the `tls` value.
   */
  tls?(
    value: unknown,
    host: string | undefined,
  ):
    | { readonly ok: true; readonly tls: BackendTlsIR }
    | { readonly ok: false; readonly field: string; readonly message: string };
}

/** Kind of the custom provider's backendRef ("Service" or "InferencePool"). */
const refKind = (ref: Rec): string => str(ref.kind) ?? "Service";

/** Where a custom provider with a backendRef is reached: the ready endpoints of the Service. */
function backendRefEndpoints(ref: Rec, ns: string, refs: AiBackendRefs): Target {
  const kind = refKind(ref);
  const name = str(ref.name) ?? "";
  if (kind === "InferencePool") return inferencePoolTarget(ref, name, ns, refs);
  if (kind !== "Service" || (str(ref.group) ?? "") !== "") {
    return { ok: false, message: `custom.backendRef: kind ${kind} is not supported; refer to a Service` };
  }
  const port = typeof ref.port === "number" ? ref.port : undefined;
  const r = refs.service(name, port);
  if (!r.ok) return { ok: false, message: `custom.backendRef: ${r.message}` };
  const endpoints = r.endpoints.filter((e) => e.ready).map((e) => ({ address: e.address, port: e.port }));
  // A Service of FQDN endpoints (an external name) is reached by DNS, as STRICT_DNS clusters resolve host names.
  if (endpoints.length === 0 && r.fqdn !== undefined) endpoints.push({ address: r.fqdn.host, port: r.fqdn.port });
  return { ok: true, host: `${name}.${ns}.svc.cluster.local`, port: r.port, endpoints };
}

type Target =
  | {
      ok: true;
      host: string;
      port: number;
      endpoints: { address: string; port: number }[];
      pool?: InferencePoolIR;
    }
  | { ok: false; message: string };

/** An InferencePool of `ns` resolved: its first target port, and its endpoint picker (a Service, called over gRPC). */
export function resolveInferencePool(
  name: string,
  ns: string,
  refs: Pick<AiBackendRefs, "service" | "inferencePool" | "pods">,
  at: string,
): { ok: true; port: number; pool: InferencePoolIR } | { ok: false; message: string } {
  const pool = refs.inferencePool?.(name);
  if (pool === undefined) return { ok: false, message: `${at} not found` };
  const port = pool.spec.targetPorts?.[0]?.number;
  if (typeof port !== "number") return { ok: false, message: `${at}: spec.targetPorts[0].number is required` };
  const picker = pool.spec.endpointPickerRef;
  const pickerKind = picker?.kind ?? "Service";
  if (picker?.name === undefined || (picker.group ?? "") !== "" || pickerKind !== "Service") {
    return { ok: false, message: `${at}: spec.endpointPickerRef must name a Service` };
  }
  const pickerPort = picker.port?.number;
  if (typeof pickerPort !== "number") {
    return { ok: false, message: `${at}: spec.endpointPickerRef.port.number is required` };
  }
  const svc = refs.service(picker.name, pickerPort);
  if (!svc.ok) return { ok: false, message: `${at}: endpoint picker: ${svc.message}` };
  const endpoints: EndpointIR[] = svc.endpoints.filter((e) => e.ready);
  const failOpen = picker.failureMode === "FailOpen";
  return {
    ok: true,
    port,
    pool: {
      name: `${ns}/${name}`,
      picker: { cluster: pickerClusterName(ns, name), service: `${ns}/${picker.name}`, endpoints },
      failOpen,
      ...(failOpen ? { fallback: poolFallback(pool, port, refs.pods?.() ?? []) } : {}),
    },
  };
}

/**
 * The ready Pods an InferencePool selects, as `ip:port` at its first target port (`[ip]:port` for IPv6, as Envoy's
 * ORIGINAL_DST parses it), sorted: where a request goes with FailOpen when the picker does not answer.
 */
function poolFallback(pool: InferencePool, port: number, pods: readonly Pod[]): string[] {
  const labels = (pool.spec.selector as { matchLabels?: unknown } | undefined)?.matchLabels;
  // The extension requires matchLabels; without any the pool selects nothing (not every Pod of the namespace).
  if (!isRec(labels) || Object.keys(labels).length === 0) return [];
  const wanted = Object.entries(labels);
  const out: string[] = [];
  for (const pod of pods) {
    const own = pod.metadata.labels ?? {};
    if (!podReady(pod) || !wanted.every(([k, v]) => own[k] === v)) continue;
    const ip = pod.status?.podIP ?? "";
    out.push(ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`);
  }
  return out.sort();
}

/**
 * An InferencePool backendRef of a custom provider. No endpoints: Envoy connects where the picker says, per request.
 */
function inferencePoolTarget(ref: Rec, name: string, ns: string, refs: AiBackendRefs): Target {
  const at = `custom.backendRef: InferencePool ${ns}/${name}`;
  const group = str(ref.group) ?? "";
  if (group !== "inference.networking.k8s.io") {
    return { ok: false, message: `${at}: group must be inference.networking.k8s.io (got ${JSON.stringify(group)})` };
  }
  const r = resolveInferencePool(name, ns, refs, at);
  if (!r.ok) return r;
  return { ok: true, host: `${name}.${ns}`, port: r.port, endpoints: [], pool: r.pool };
}

/** One LLMProvider (or named provider) of the spec → where and how to reach it. */
export function translateProvider(
  name: string,
  p: Rec,
  tlsPolicy: boolean,
  ns = "",
  refs?: AiBackendRefs,
): ProviderResult {
  const variant = Object.keys(VARIANTS).find((k) => isRec(p[k]));
  if (variant === undefined) return { ok: false, message: "this provider variant is not served yet" };
  const settings = p[variant] as Rec;
  const v = VARIANTS[variant]?.(settings);
  if (v === undefined) {
    const missing = variant === "providerF" ? "projectId" : variant === "providerB" ? "endpoint" : "resourceName";
    return { ok: false, message: `${variant} needs ${missing}` };
  }
  let service:
    | { host: string; port: number; endpoints: { address: string; port: number }[]; pool?: InferencePoolIR }
    | undefined;
  if (v.kind === "custom" && isRec(settings.backendRef)) {
    if (refs === undefined) return { ok: false, message: "custom.backendRef cannot be resolved here" };
    const r = backendRefEndpoints(settings.backendRef, ns, refs);
    if (!r.ok) return r;
    service = r;
  }
  // With a Service, `host` (if set) is only what the provider is told it is called (authority, SNI).
  const address = str(p.host) ?? service?.host ?? v.host;
  const port = service?.port ?? (typeof p.port === "number" ? p.port : 443);
  // Real provider hosts are HTTPS on 443; an overridden host on another port, or an in-cluster Service, is plain HTTP
  // unless a tls policy says so.
  const tls = (service === undefined && port === 443) || tlsPolicy;
  const authority = port === 443 || port === 80 ? address : `${address}:${port}`;
  return {
    ok: true,
    provider: {
      name,
      kind: v.kind,
      address,
      port,
      // Without a tls policy: the system CAs, SNI and the certificate's name from the host.
      ...(tls ? { tls: { sni: address } } : {}),
      authority,
      settings,
      ...(service !== undefined && service.pool === undefined ? { endpoints: service.endpoints } : {}),
      ...(service?.pool !== undefined ? { pool: service.pool } : {}),
      ...(str(p.path) !== undefined ? { path: str(p.path) as string } : {}),
      ...(str(p.pathPrefix) !== undefined ? { pathPrefix: str(p.pathPrefix) as string } : {}),
    },
  };
}

/** The name a single `provider` gets (policies cannot target it by sectionName; it is the only one). */
export const SINGLE_PROVIDER = "default";

export type AiClusterResult = { ok: true; cluster: LlmClusterIR } | { ok: false; message: string };

export function translateAiBackend(
  clusterName: string,
  backend: string,
  spec: Rec,
  refs?: AiBackendRefs,
): AiClusterResult {
  const ns = backend.split("/")[0] ?? "";
  const ai = spec.ai;
  if (!isRec(ai)) return { ok: false, message: "spec.ai is missing" };
  const policies = isRec(spec.policies) ? spec.policies : {};
  const groups: LlmProviderIR[][] = [];
  const problems: string[] = [];
  const add = (group: LlmProviderIR[], name: string, p: Rec, path: string) => {
    const own = isRec(p.policies) ? p.policies : {};
    const r = translateProvider(name, p, own.tls !== undefined || policies.tls !== undefined, ns, refs);
    if (!r.ok) {
      problems.push(`${path}: ${r.message}`);
      return;
    }
    let provider = r.provider;
    // The provider's own tls wins over the GwBackend's as a whole (spec: fields merge per top-level field).
    const tlsValue = own.tls ?? policies.tls;
    if (tlsValue !== undefined) {
      const at = own.tls !== undefined ? `${path}.policies.tls` : "spec.policies.tls";
      if (refs?.tls === undefined) {
        problems.push(`${at}: cannot be resolved here`);
        return;
      }
      const host = provider.address;
      const t = refs.tls(tlsValue, IP.test(host) ? undefined : host);
      if (!t.ok) {
        problems.push(`${at}.${t.field}: ${t.message}`);
        return;
      }
      provider = { ...provider, tls: t.tls };
    }
    // The provider's own tunnel wins over the GwBackend's (spec: GwBackend, then the provider's policies).
    const tunnelValue = own.tunnel ?? policies.tunnel;
    if (tunnelValue === undefined) {
      group.push(provider);
      return;
    }
    const at = own.tunnel !== undefined ? `${path}.policies.tunnel` : "spec.policies.tunnel";
    if (refs?.tunnel === undefined) {
      problems.push(`${at}: cannot be resolved here`);
      return;
    }
    const t = resolveTunnel(tunnelValue, ns, refs.tunnel);
    if (!t.ok) problems.push(`${at}: ${t.message}`);
    else if (provider.tls === undefined) problems.push(`${at}: ${TUNNEL_NEEDS_TLS}`);
    else group.push({ ...provider, tunnel: t.tunnel });
  };
  if (isRec(ai.provider)) {
    const g: LlmProviderIR[] = [];
    add(g, SINGLE_PROVIDER, ai.provider, "spec.ai.provider");
    groups.push(g);
  } else if (Array.isArray(ai.groups)) {
    ai.groups.forEach((grp: unknown, gi) => {
      const g: LlmProviderIR[] = [];
      const providers = isRec(grp) && Array.isArray(grp.providers) ? grp.providers : [];
      providers.forEach((p: unknown, pi) => {
        if (isRec(p) && typeof p.name === "string") add(g, p.name, p, `spec.ai.groups[${gi}].providers[${pi}]`);
      });
      if (g.length > 0) groups.push(g);
    });
  }
  if (Array.isArray(ai.groups)) {
    for (const p of groups.flat()) {
      if (p.pool !== undefined) {
        problems.push(
          `spec.ai.groups: provider ${p.name} refers to InferencePool ${p.pool.name}, which only a single spec.ai.provider may do (its endpoint picker, not Envoy's priorities, chooses where each request goes)`,
        );
      }
    }
  }
  if (problems.length > 0) return { ok: false, message: problems.join("; ") };
  if (groups.length === 0) return { ok: false, message: "spec.ai has no provider" };
  const health = isRec(policies.health) ? policies.health : {};
  const eviction = isRec(health.eviction) ? health.eviction : {};
  const durationMs = (typeof eviction.duration === "string" ? parseDurationMs(eviction.duration) : undefined) ?? 3000;
  const consecutiveFailures =
    typeof eviction.consecutiveFailures === "number" && eviction.consecutiveFailures > 0
      ? eviction.consecutiveFailures
      : 1;
  const connection = clusterConnection(policies);
  return {
    ok: true,
    cluster: {
      kind: "llm",
      name: clusterName,
      http2: false,
      backend,
      groups,
      eviction: { consecutiveFailures, durationMs },
      ...(connection !== undefined ? { connection } : {}),
    },
  };
}

const ms = (v: unknown) => (typeof v === "string" ? parseDurationMs(v) : undefined);
const IP = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]+:[0-9a-fA-F:]*)$/;

/**
 * The GwBackend's own `policies.tcp` and `policies.http.version`: one Envoy cluster holds every provider, so they apply
 * to all of them but those with their own (reached through a hop: backend/ai-provider-connection.ts,
 * xds/llm-provider-hop.ts). The defaults are a Service's. Also what a GwPolicy's `backend.tcp` / `backend.http` gives
 * the cluster (xds/llm-connection.ts).
 */
export function clusterConnection(policies: Rec): LlmClusterIR["connection"] {
  const out: {
    -readonly [K in keyof NonNullable<LlmClusterIR["connection"]>]: NonNullable<LlmClusterIR["connection"]>[K];
  } = {};
  const tcp = isRec(policies.tcp) ? policies.tcp : {};
  const connectTimeout = ms(tcp.connectTimeout);
  if (connectTimeout !== undefined) out.connectTimeoutMs = connectTimeout;
  if (isRec(tcp.keepalive)) {
    out.keepalive = keepaliveSettings(tcp.keepalive);
  }
  const http = isRec(policies.http) ? policies.http : {};
  if (http.version === "HTTP2") out.http2 = true;
  else if (http.version === "HTTP1") out.http2 = false;
  return Object.keys(out).length === 0 ? undefined : out;
}
