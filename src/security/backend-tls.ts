// A backend's TLS as Sluice's own clients connect with it (node:tls options), from the BackendTlsIR the translator
// resolves for Envoy's clusters (xds/backend-tls.ts): the same CA, SNI, names, client certificate, skip-verify and
// groups, so Sluice and Envoy agree on what a backend must present. Used for MCP targets and for the authorization
// services Sluice calls itself, and
// the OTLP collectors its span relay exports to.

import { createHash } from "node:crypto";
import { type AgentOptions, Agent as HttpsAgent } from "node:https";
import { type ConnectionOptions, checkServerIdentity, type PeerCertificate } from "node:tls";
import type { BackendTlsIR } from "../translate/ir.js";

/** A name check against the names the policy asks for (any one of them), Envoy's `match_typed_subject_alt_names`. */
function checkNames(sans: readonly string[]): (host: string, cert: PeerCertificate) => Error | undefined {
  return (_host, cert) => {
    let last: Error | undefined;
    for (const name of sans) {
      last = checkServerIdentity(name, cert);
      if (last === undefined) return undefined;
    }
    return last ?? new Error("the certificate carries none of the names asked for");
  };
}

/** node:tls options for `c`; `alpn` is the one protocol Sluice speaks over it (`h2` or `http/1.1`). */
export function nodeTlsOptions(c: BackendTlsIR, alpn = "http/1.1"): ConnectionOptions {
  return {
    ALPNProtocols: [alpn],
    ...(c.ca !== undefined ? { ca: c.ca } : {}),
    ...(c.sni !== undefined ? { servername: c.sni } : {}),
    ...(c.clientCert !== undefined ? { cert: c.clientCert.chain, key: c.clientCert.key } : {}),
    ...(c.curves !== undefined && c.curves.length > 0 ? { ecdhCurve: c.curves.join(":") } : {}),
    rejectUnauthorized: c.insecure !== "All",
    // No names to check (skip-verify Hostname, or an IP address without sni): the chain is checked, not the name.
    checkServerIdentity: c.insecure !== undefined || c.sans.length === 0 ? () => undefined : checkNames(c.sans),
  };
}

/**
 * Keep-alive HTTPS agents for Sluice's own HTTP calls over a backend's TLS, one per distinct setting: a translation's
 * new BackendTlsIR with the same content (a reload) reuses the agent and its connections.
 */
export class HttpsAgents {
  readonly #agents = new Map<string, HttpsAgent>();
  readonly #ids = new WeakMap<BackendTlsIR, string>();
  readonly #options: AgentOptions;

  constructor(options: AgentOptions = { keepAlive: true, maxSockets: 64 }) {
    this.#options = options;
  }

  agent(tls: BackendTlsIR): HttpsAgent {
    let id = this.#ids.get(tls);
    if (id === undefined) {
      id = createHash("sha256").update(JSON.stringify(tls)).digest("base64url");
      this.#ids.set(tls, id);
    }
    let a = this.#agents.get(id);
    if (a === undefined) {
      a = new HttpsAgent({ ...this.#options, ...nodeTlsOptions(tls, "http/1.1") });
      this.#agents.set(id, a);
    }
    return a;
  }

  close(): void {
    for (const a of this.#agents.values()) a.destroy();
    this.#agents.clear();
  }
}
