// `tunnel` of a backend's policies (`{backendRef}`: an HTTP proxy reached through a Service or a GwBackend) → where
// Envoy opens its HTTP/1.1 CONNECT tunnels (xds/cluster.ts wraps the cluster's TLS in Envoy's http_11_proxy transport
// socket, which sends `CONNECT <host>:<port>` to the proxy before the TLS handshake: the endpoint's host name when it
// has one (a provider's DNS name), else its address).
//
// What Envoy needs: one proxy address (an IP and a port), and TLS inside the tunnel; a plaintext connection is sent to
// the proxy as a plain request, which a CONNECT proxy does not route. So:
// - a Service proxy is its first ready endpoint (sorted, so every translation picks the same one while it is ready);
// - a GwBackend proxy is a static IP address and port (a host name would need a resolver Envoy does not have here);
// - a backend without TLS cannot be tunnelled: reported, and never reached around the proxy (fail closed).

import { isIP } from "node:net";
import type { ServiceEndpoints } from "./resolve.js";

export interface TunnelIR {
  /** The proxy's IP address and port. */
  readonly address: string;
  readonly port: number;
  /** `Service ns/name` or `GwBackend ns/name`, for messages. */
  readonly proxy: string;
}

export type TunnelResult =
  | { readonly ok: true; readonly tunnel: TunnelIR }
  | { readonly ok: false; readonly message: string };

/** How a tunnel's backendRef is looked up, in the namespace of the policy that names it. */
export interface TunnelRefs {
  service(name: string, port: number | undefined): ServiceEndpoints;
  /** A GwBackend's `spec.static`, when the GwBackend exists. */
  gwBackendStatic(name: string): { readonly host?: string; readonly port?: number } | "not-static" | undefined;
}

type Rec = Readonly<Record<string, unknown>>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** The proxy of a `tunnel` value; `ns` is where its backendRef is resolved. */
export function resolveTunnel(value: unknown, ns: string, refs: TunnelRefs): TunnelResult {
  const ref = isRec(value) && isRec(value.backendRef) ? value.backendRef : undefined;
  if (ref === undefined) return { ok: false, message: "backendRef is required" };
  const name = str(ref.name) ?? "";
  const refNs = str(ref.namespace) ?? ns;
  if (refNs !== ns) {
    return { ok: false, message: `backendRef: a proxy in another namespace (${refNs}) is not allowed` };
  }
  const kind = str(ref.kind) ?? "Service";
  const group = str(ref.group) ?? "";
  if (kind === "Service" && group === "") {
    const port = typeof ref.port === "number" ? ref.port : undefined;
    const r = refs.service(name, port);
    if (!r.ok) return { ok: false, message: `backendRef: ${r.message}` };
    const ready = r.endpoints.find((e) => e.ready);
    if (ready === undefined) {
      return { ok: false, message: `backendRef: Service ${ns}/${name} has no ready endpoint` };
    }
    return { ok: true, tunnel: { address: ready.address, port: ready.port, proxy: `Service ${ns}/${name}` } };
  }
  if (kind === "GwBackend" && group === "sluice.dev") {
    const st = refs.gwBackendStatic(name);
    if (st === undefined) return { ok: false, message: `backendRef: GwBackend ${ns}/${name} not found` };
    if (st === "not-static" || st.host === undefined || st.port === undefined) {
      return { ok: false, message: `backendRef: GwBackend ${ns}/${name} must be a static host and port` };
    }
    if (isIP(st.host) === 0) {
      return {
        ok: false,
        message: `backendRef: GwBackend ${ns}/${name} must have an IP address as its host (got ${st.host}); use a Service for a proxy known by name`,
      };
    }
    return { ok: true, tunnel: { address: st.host, port: st.port, proxy: `GwBackend ${ns}/${name}` } };
  }
  return { ok: false, message: `backendRef: a proxy must be a Service or a GwBackend (got ${group}/${kind})` };
}

/** Why a backend without TLS cannot use its tunnel. */
export const TUNNEL_NEEDS_TLS =
  "Envoy opens a CONNECT tunnel only around TLS (a plaintext request would go to the proxy as it is): set tls for this backend, or remove tunnel";
