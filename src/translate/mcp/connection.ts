// Connection policies of an MCP target (`tls`, `auth`, `tcp`, `http`, `tunnel` of its effective backend policy: a
// GwPolicy's < the GwBackend's own `spec.policies` < a GwPolicy with the target's sectionName < the target's own
// `policies`), resolved for Sluice's own transport to targets (src/mcp/target-request.ts), which is where they are
// served: MCP targets are not Envoy clusters. `health` is served by the MCP service too (src/mcp/target-health.ts),
// its `unhealthyCondition` compiled here. Secrets and ConfigMaps are read here, so the MCP service reads the table
// alone. What Node's HTTP client cannot do is named (mcpUnservedParts) for status, never dropped silently.

import { compileExpression } from "../../cel/index.js";
import type { CredentialPlan } from "../../credentials/plan.js";
import { RESPONSE_ENVIRONMENT } from "../../extproc/transformation.js";
import { tunnelRefs } from "../backend/resolve.js";
import { resolveTunnel } from "../backend/tunnel.js";
import { parseDurationMs } from "../duration.js";
import type { TranslationInput } from "../input.js";
import type { BackendTlsIR, EffectivePolicyIR, PolicySourceIR } from "../ir.js";
import {
  KEEPALIVE_PROBES_SETTABLE,
  type KeepaliveProbes,
  keepaliveProbesUnserved,
  keepaliveSettings,
} from "../keepalive.js";
import { backendCredential } from "../xds/backend-credential.js";
import { resolveBackendTls } from "../xds/backend-tls.js";
import { READS_BODY } from "../xds/filters/transformation.js";
import type { PolicyNote } from "../xds/filters/types.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
const ms = (v: unknown) => (typeof v === "string" ? parseDurationMs(v) : undefined);

/** How Sluice connects to one MCP target; absent fields are Node's defaults (plain HTTP/1.1, no timeouts of its own). */
export interface McpTargetConnection {
  /** TLS to the target: its URLs are `https:`. */
  readonly tls?: BackendTlsIR;
  readonly connectTimeoutMs?: number;
  /** TCP keepalive idle time. */
  readonly keepaliveMs?: number;
  /**
   * TCP keepalive probe interval and count (the spec's defaults, 180 s and 9, when unset), present only when this
   * Node.js can set them (KEEPALIVE_PROBES_SETTABLE).
   */
  readonly keepaliveProbes?: KeepaliveProbes;
  /** `http.requestTimeout`: longest wait for a target's answer to one request. */
  readonly requestTimeoutMs?: number;
  /** `tunnel`: an HTTP CONNECT proxy every connection to the target opens through. */
  readonly proxy?: { readonly address: string; readonly port: number; readonly name: string };
  /** `auth` with a key or a Secret's: the header written on every request. */
  readonly header?: { readonly name: string; readonly value: string };
  /** `auth` Sluice mints (src/credentials/): the plan, applied to every request. */
  readonly minted?: CredentialPlan;
  /** `http.version: HTTP2`: HTTP/2 to the target (ALPN h2 over TLS, prior knowledge over plain TCP). */
  readonly http2?: true;
  /** `health`: the target is evicted after failures (src/mcp/target-health.ts); `key` is its backend and name. */
  readonly health?: McpTargetHealth;
}

/** A target's `health.eviction`, scored per Sluice process as Envoy-routed backends' endpoints are (src/health/). */
export interface McpTargetHealth {
  /** `<MCP table key>|<target>`: one state per target of a backend. */
  readonly key: string;
  /** `namespace/name` of the GwBackend, and the target's name (metrics). */
  readonly backend: string;
  readonly target: string;
  /** Failures in a row that evict; absent when unset (or 0). */
  readonly consecutiveFailures?: number;
  /** Health (0..100) below which the target is evicted; absent when unset. */
  readonly healthThreshold?: number;
  /** Health the target returns with; absent: the health it held when evicted. */
  readonly restoreHealth?: number;
  /** Base eviction time; the n-th eviction lasts n times this. */
  readonly durationMs: number;
  /**
   * `unhealthyCondition` (compiled, not reading `response.body`): judges each HTTP answer of the target by its status
   * and headers at the HTTP layer (src/mcp/target-request.ts) in place of the fixed rule. Absent: the fixed rule.
   */
  readonly condition?: string;
}

/** Whether an `unhealthyCondition` reads the response body, which Sluice does not give it for MCP targets. */
const readsBody = (condition: unknown) => typeof condition === "string" && READS_BODY.response.test(condition);

/** Parts of a policy field Sluice's transport to MCP targets does not serve, as `[subfield, why]`. */
export function mcpUnservedParts(field: string, value: unknown): readonly (readonly [string, string])[] {
  const v = isRec(value) ? value : {};
  switch (field) {
    case "mcp":
      return [];
    case "tls":
      return Array.isArray(v.alpnProtocols) && !v.alpnProtocols.includes("http/1.1") && !v.alpnProtocols.includes("h2")
        ? [
            [
              "alpnProtocols",
              "Sluice offers over TLS only the protocol it speaks to an MCP target: h2 with http.version HTTP2, else http/1.1",
            ],
          ]
        : [];
    case "tcp": {
      // Sluice's own sockets (Envoy is not on the way to MCP targets). Node.js 26's setKeepAlive takes the probe
      // interval and count too; before it, Node sets only the idle time and libuv fixes the interval at 1 s and the
      // count at 10 (seen with strace on Node 22.23, libuv 1.51), whatever the policy or the spec's defaults say.
      if (KEEPALIVE_PROBES_SETTABLE || !isRec(v.keepalive)) return [];
      const k = v.keepalive;
      return [
        [
          "keepalive.interval",
          `${keepaliveProbesUnserved("interval", "MCP targets")}${k.interval === undefined ? ", not the default 180s" : ""}`,
        ],
        [
          "keepalive.retries",
          `${keepaliveProbesUnserved("count", "MCP targets")}${k.retries === undefined ? ", not the default 9" : ""}`,
        ],
      ];
    }
    case "health":
      // An MCP answer's body is a JSON-RPC message whose outcome the fixed rule already reads, or an SSE stream that
      // may last minutes (a verdict at its end comes too late to stop the traffic that is failing).
      return readsBody(v.unhealthyCondition)
        ? [
            [
              "unhealthyCondition",
              "not applied to MCP targets when it reads response.body (an MCP answer's body is a JSON-RPC message or an SSE stream that may last minutes): the fixed rule applies, a target's failures (no connection, no answer, an HTTP error status) count against its health, its answers (JSON-RPC errors included) for it",
            ],
          ]
        : [];
    case "http":
    case "auth":
    case "tunnel":
      return [];
    default:
      return [
        ["", "not applied to MCP targets: Sluice's MCP service serves tls, auth, tcp, http, tunnel and health only"],
      ];
  }
}

function fieldOf(p: EffectivePolicyIR, name: string): { value: unknown; from: PolicySourceIR } | undefined {
  const f = p[name];
  return f === undefined || "combined" in f ? undefined : f;
}

export interface ResolvedConnection {
  readonly connection?: McpTargetConnection;
  /** Why the target cannot be reached as its policy says (a CA, a certificate, a key, a proxy missing): it fails. */
  readonly failure?: string;
  readonly notes: readonly PolicyNote[];
}

/**
 * The connection of target `target` of `backend` (`GwBackend ns/name`) under its effective policy `p`; `host` is the
 * name it is reached by (SNI and the certificate's name by default; undefined for an IP address).
 */
export function mcpTargetConnection(
  p: EffectivePolicyIR | undefined,
  backend: string,
  target: string,
  host: string | undefined,
  input: TranslationInput,
  /** The target's health state key (`<table key>|<target>`); without it `health` is not read. */
  healthKey?: string,
): ResolvedConnection {
  if (p === undefined) return { notes: [] };
  const out: { -readonly [K in keyof McpTargetConnection]: McpTargetConnection[K] } = {};
  const notes: PolicyNote[] = [];
  const failures: string[] = [];
  const fail = (from: PolicySourceIR, field: string, message: string) => {
    const m = `${message}; Sluice does not connect to MCP target ${target} of ${backend} until it is`;
    failures.push(`${field}: ${m}`);
    notes.push({ from, field, message: m });
  };
  const nsOf = (from: PolicySourceIR) => from.name.split("/")[0] ?? "";

  const tls = fieldOf(p, "tls");
  if (tls !== undefined) {
    const r = resolveBackendTls(tls.value, nsOf(tls.from), host, input);
    if (r.ok) out.tls = r.tls;
    else fail(tls.from, `backend.tls.${r.field}`, r.message);
  }
  const tcp = fieldOf(p, "tcp");
  if (tcp !== undefined && isRec(tcp.value)) {
    const connect = ms(tcp.value.connectTimeout);
    if (connect !== undefined) out.connectTimeoutMs = connect;
    const k = tcp.value.keepalive;
    if (isRec(k)) {
      const settings = keepaliveSettings(k);
      out.keepaliveMs = settings.timeMs;
      if (KEEPALIVE_PROBES_SETTABLE) out.keepaliveProbes = { intervalMs: settings.intervalMs, count: settings.probes };
    }
  }
  const http = fieldOf(p, "http");
  if (http !== undefined && isRec(http.value)) {
    const timeout = ms(http.value.requestTimeout);
    if (timeout !== undefined && timeout > 0) out.requestTimeoutMs = timeout;
    if (http.value.version === "HTTP2") out.http2 = true;
  }
  const health = fieldOf(p, "health");
  if (health !== undefined && isRec(health.value) && healthKey !== undefined) {
    const e = isRec(health.value.eviction) ? health.value.eviction : {};
    const num = (x: unknown) => (typeof x === "number" ? x : undefined);
    const cf = num(e.consecutiveFailures);
    const threshold = num(e.healthThreshold);
    const restore = num(e.restoreHealth);
    let condition: string | undefined;
    const text = health.value.unhealthyCondition;
    if (typeof text === "string" && !readsBody(text)) {
      const c = compileExpression(text, RESPONSE_ENVIRONMENT);
      if ("errors" in c) {
        notes.push({
          from: health.from,
          field: "backend.health.unhealthyCondition",
          message: `backend.health.unhealthyCondition: ${c.errors.map((x) => x.message).join("; ")}; left out for MCP target ${target} of ${backend}, the fixed rule applies`,
          reason: "Ignored",
        });
      } else condition = text;
    }
    out.health = {
      key: healthKey,
      backend: backend.replace(/^GwBackend /, ""),
      target,
      durationMs: ms(e.duration) ?? 3000,
      ...(cf !== undefined && cf > 0 ? { consecutiveFailures: cf } : {}),
      ...(threshold !== undefined ? { healthThreshold: threshold } : {}),
      ...(restore !== undefined ? { restoreHealth: restore } : {}),
      ...(condition !== undefined ? { condition } : {}),
    };
  }
  const tunnel = fieldOf(p, "tunnel");
  if (tunnel !== undefined) {
    const ns = nsOf(tunnel.from);
    const r = resolveTunnel(tunnel.value, ns, tunnelRefs(input, ns));
    if (r.ok) out.proxy = { address: r.tunnel.address, port: r.tunnel.port, name: r.tunnel.proxy };
    else fail(tunnel.from, "backend.tunnel", r.message);
  }
  const auth = fieldOf(p, "auth");
  if (auth !== undefined) {
    const r = backendCredential(auth.value, auth.from, `${backend} target ${target}`, input, "mcp");
    if (!r.ok) {
      // backendCredential's messages speak of Envoy's 503; here the target fails instead.
      fail(r.from, r.field, r.message.replace(/; requests to .* are answered 503 until it is$/, ""));
    } else {
      for (const n of r.notes) notes.push({ from: n.from, field: n.field, message: n.message });
      if (r.credential !== undefined) {
        const c = r.credential;
        out.header = { name: c.header, value: c.prefix === "" ? c.value : `${c.prefix} ${c.value}` };
      }
      if (r.minted !== undefined) out.minted = r.minted;
    }
  }
  return {
    ...(Object.keys(out).length > 0 ? { connection: out } : {}),
    ...(failures.length > 0 ? { failure: failures.join("; ") } : {}),
    notes,
  };
}
