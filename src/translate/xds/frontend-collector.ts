// An OTLP collector a Gateway port's frontend policy names (`tracing.backendRef`, `accessLog.otlp.backendRef`) → its
// Envoy cluster, `<use>/<ns>/<name>`: a Service's ready endpoints or a static GwBackend, with the connection fields
// (`tls`, `tcp`, `http.version`) of that Service's or GwBackend's backend policies (policy/engine.ts collects them
// into ListenerPolicyIR.refBackends), as a route backend to it would have them. A hosted collector is usually reached
// over TLS only. A TLS that cannot be had (a CA ConfigMap or client Secret missing or unreadable) leaves the collector
// out, reported on both policies: telemetry is never sent in clear to a collector its policy says is reached over
// TLS, and the rest of the listener is not disturbed.

import type { Cluster } from "../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { referenceAllowed, serviceEndpoints } from "../backend/resolve.js";
import type { TranslationInput } from "../input.js";
import type { BackendConnectionIR, BackendTlsIR, ClusterIR, ListenerPolicyIR, PolicySourceIR } from "../ir.js";
import { findNamed } from "../lookup.js";
import { collectorClusterName } from "../names.js";
import { refBackendKey } from "../policy/engine.js";
import { backendConnection } from "./backend-connection.js";
import { destinationHost, resolveBackendTls } from "./backend-tls.js";
import { buildCluster } from "./cluster.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown) => (typeof v === "string" ? v : undefined);
const num = (v: unknown) => (typeof v === "number" ? v : undefined);

export interface Collector {
  readonly cluster: Cluster;
  readonly clusterName: string;
  /** The host name of its URI (OTLP/HTTP). */
  readonly host: string;
  /** The backendRef's name: the `:authority` of gRPC exports. */
  readonly name: string;
  /** Its backend policy's TLS: Envoy's cluster has it; the span relay connects with it; a client certificate is SDS. */
  readonly tls?: BackendTlsIR;
}

export interface CollectorContext {
  readonly input: TranslationInput | undefined;
  /** The namespace of the frontend policy naming the collector. */
  readonly policyNs: string;
  readonly refBackends: ListenerPolicyIR["refBackends"];
  /** The frontend field naming it, for messages: `tracing` or `accessLog.otlp`. */
  readonly field: string;
  /** A note on the frontend policy, `field` relative to the collector's field. */
  readonly note: (field: string, message: string) => void;
  /** A note on another policy (the collector's Service's GwPolicy, a GwBackend's own policies). */
  readonly noteOn: (from: PolicySourceIR, field: string, message: string) => void;
}

/** The collector's cluster from a backendRef; undefined (reported) when it cannot be had. */
export function collector(
  use: "tracing" | "accesslog",
  refValue: unknown,
  grpc: boolean,
  ctx: CollectorContext,
): Collector | undefined {
  const { input, policyNs, note } = ctx;
  const ref = isRec(refValue) ? refValue : {};
  const name = str(ref.name) ?? "";
  const kind = str(ref.kind) ?? "Service";
  // A collector in another namespace, like any cross-namespace reference, needs a ReferenceGrant there.
  const ns = str(ref.namespace) ?? policyNs;
  const group = str(ref.group) ?? (kind === "GwBackend" ? "sluice.dev" : "");
  if (
    input !== undefined &&
    !referenceAllowed(
      input,
      { group: "sluice.dev", kind: "GwPolicy", namespace: policyNs },
      { group, kind, namespace: ns, name },
    )
  ) {
    note("backendRef", `${kind} ${ns}/${name} is not allowed by a ReferenceGrant in ${ns}; not applied`);
    return undefined;
  }
  let endpoints: { address: string; port: number; ready: boolean }[] = [];
  let host = name;
  let backend: string;
  if (kind === "Service" && (str(ref.group) ?? "") === "" && input !== undefined) {
    const r = serviceEndpoints(input, ns, name, num(ref.port));
    if (!r.ok) {
      note("backendRef", `${r.message}; not applied`);
      return undefined;
    }
    endpoints = r.endpoints.filter((e) => e.ready);
    host = `${name}.${ns}.svc.cluster.local`;
    backend = `Service ${ns}/${name} port ${num(ref.port)}`;
  } else if (kind === "GwBackend" && input !== undefined) {
    const st = findNamed(input.backends, ns, name)?.spec.static;
    if (st === undefined || st.host === undefined || st.port === undefined) {
      note("backendRef", `GwBackend ${ns}/${name} is not a static host and port; not applied`);
      return undefined;
    }
    endpoints = [{ address: st.host, port: st.port, ready: true }];
    host = st.host;
    backend = `GwBackend ${ns}/${name}`;
  } else {
    note("backendRef", "only a Service or a static GwBackend can be an OTLP collector; not applied");
    return undefined;
  }
  const clusterName = collectorClusterName(use, ns, name);
  const base: ClusterIR =
    /^[0-9.]+$/.test(host) || kind === "Service"
      ? { kind: "static", name: clusterName, endpoints, http2: grpc }
      : { kind: "dns", name: clusterName, host, port: endpoints[0]?.port ?? 4317, http2: grpc };
  const port = num(ref.port);
  const own =
    ctx.refBackends?.[refBackendKey({ group, kind, name, namespace: ns, ...(port !== undefined ? { port } : {}) })];
  const connection = own === undefined ? undefined : collectorConnection(own, backend, base, grpc, ctx);
  if (connection === null) return undefined;
  const cluster = buildCluster(connection === undefined ? base : { ...base, connection });
  return { cluster, clusterName, host, name, ...(connection?.tls !== undefined ? { tls: connection.tls } : {}) };
}

/**
 * The collector's backend policy as its cluster's connection: `tls`, `tcp`, `http.version`; each other backend field
 * of those policies, and `http.requestTimeout` (the export's timeout is the tracer's or logger's own), reported as
 * doing nothing there. Null when its TLS cannot be had.
 */
function collectorConnection(
  own: NonNullable<ListenerPolicyIR["refBackends"]>[string],
  backend: string,
  base: ClusterIR,
  grpc: boolean,
  ctx: CollectorContext,
): BackendConnectionIR | undefined | null {
  const at = `Envoy's exports to ${backend} as the collector of frontend.${ctx.field}`;
  for (const u of own.unserved) {
    ctx.noteOn(
      u.from,
      `backend.${u.field}`,
      `not applied to ${at}: only tls, tcp and http.version apply there (routes that send traffic to ${backend} apply it)`,
    );
  }
  const { policy } = own;
  const tlsField = policy.tls;
  let tls: BackendTlsIR | undefined;
  if (tlsField !== undefined && !("combined" in tlsField)) {
    const ns = tlsField.from.name.split("/")[0] ?? "";
    const r = resolveBackendTls(tlsField.value, ns, destinationHost(backend, base), ctx.input);
    if (!r.ok) {
      ctx.noteOn(tlsField.from, `backend.tls.${r.field}`, `${r.message}; ${at} are not sent until it is`);
      ctx.note(
        "backendRef",
        `the TLS of ${backend} (backend.tls.${r.field} of ${tlsField.from.kind} ${tlsField.from.name}) cannot be had; not applied`,
      );
      return null;
    }
    tls = r.tls;
  }
  const settings = backendConnection(policy) ?? {};
  const http = policy.http;
  const httpValue = http !== undefined && !("combined" in http) && isRec(http.value) ? http.value : undefined;
  let http2 = settings.http2;
  if (http !== undefined && !("combined" in http) && httpValue !== undefined) {
    if (grpc && http2 === false) {
      ctx.noteOn(http.from, "backend.http.version", `not applied to ${at}: OTLP/gRPC is HTTP/2`);
    }
    if (httpValue.requestTimeout !== undefined) {
      ctx.noteOn(
        http.from,
        "backend.http.requestTimeout",
        `not applied to ${at}: an export's timeout is the exporter's own (5s)`,
      );
    }
  }
  // OTLP/gRPC is HTTP/2 whatever ALPN offers (not left to ALPN's choice, as an unset version would be over TLS).
  if (grpc) http2 = true;
  const { http2: _, ...rest } = settings;
  const connection: BackendConnectionIR = {
    ...rest,
    ...(http2 !== undefined ? { http2 } : {}),
    ...(tls !== undefined ? { tls } : {}),
  };
  return Object.keys(connection).length === 0 ? undefined : connection;
}
