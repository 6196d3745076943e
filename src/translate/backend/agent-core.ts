// GwBackend `cloudA.agentCore`: the cloudA agent runtime (docs/credentials.md, "Agent runtime"). Its cluster goes to
// the runtime's regional data-plane endpoint over TLS; every request on it leaves Envoy as the runtime's
// InvokeAgentRuntime call: Sluice's credential ext_proc (src/credentials/) writes `:path`
// (`/runtimes/<ARN, percent-encoded>/invocations?qualifier=...`), `:authority` and, when the client sent none, a
// runtime session id (as the AWS SDKs do), then signs it with SigV4 (service `bedrock-agentcore`, the ARN's region;
// the default credential chain unless a `backend.auth` says otherwise) or writes the backend's own credential (a
// runtime with an OAuth authorizer takes a bearer token). Responses, streamed ones included, pass through unbuffered.

import { createHash } from "node:crypto";
import { AGENT_RUNTIME_ARN_PATTERN, AGENT_RUNTIME_QUALIFIER_PATTERN } from "../../api/backend.js";
import type { CredentialPlan, MintPlan } from "../../credentials/plan.js";
import { type CredentialProblem, resolveBackendAuth } from "../../credentials/resolve.js";
import type { TranslationInput } from "../input.js";
import type { AgentCoreIR, BackendConnectionIR, ClusterIR, PolicySourceIR } from "../ir.js";
import type { CredentialOutcome } from "../xds/backend-credential.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/** The signing service of the runtime's data plane. */
export const AGENT_CORE_SERVICE = "bedrock-agentcore";
/** The header carrying the runtime session (33 to 256 characters). */
export const AGENT_CORE_SESSION_HEADER = "x-amzn-bedrock-agentcore-runtime-session-id";
/**
 * Signed beside host and x-amz-*, when the request has them: the session is what the runtime routes by, the content
 * type how it reads the payload.
 */
const SIGNED_HEADERS = [AGENT_CORE_SESSION_HEADER, "content-type"];

// The schema's patterns (checked again here: the translator also takes input no validator has seen).
const ARN = new RegExp(AGENT_RUNTIME_ARN_PATTERN);
const QUALIFIER = new RegExp(AGENT_RUNTIME_QUALIFIER_PATTERN);
const PARTS = /^arn:([^:]+):[^:]+:([^:]+):/;
const FIELD = "spec.cloudA.agentCore";

/** RFC 3986 unreserved characters stay, everything else is %XX (the AWS SDKs' encoding of a path label). */
function encode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Where the runtime's data plane is reached. */
export interface AgentCoreEndpoint {
  readonly tls: boolean;
  readonly host: string;
  readonly port: number;
}

/**
 * The endpoint override of the Sluice process, as the AWS SDKs read it: `AWS_ENDPOINT_URL_BEDROCK_AGENTCORE`, else
 * `AWS_ENDPOINT_URL` (a VPC interface endpoint, a FIPS endpoint, a local stand-in). Undefined when neither is set.
 */
export function agentCoreEndpointFromEnv(env: Readonly<Record<string, string | undefined>>): string | undefined {
  const v = env.AWS_ENDPOINT_URL_BEDROCK_AGENTCORE?.trim() || env.AWS_ENDPOINT_URL?.trim();
  return v === "" ? undefined : v;
}

export type AgentCoreResolution =
  | { readonly ok: true; readonly ir: AgentCoreIR; readonly endpoint: AgentCoreEndpoint }
  | { readonly ok: false; readonly field: string; readonly message: string };

/** The runtime a `cloudA` value names and where it is reached; every problem named by its field. */
export function resolveAgentCore(cloudA: unknown, backend: string, override?: string): AgentCoreResolution {
  const core = isRec(cloudA) && isRec(cloudA.agentCore) ? cloudA.agentCore : undefined;
  if (core === undefined) return { ok: false, field: FIELD, message: "is required" };
  const arn = typeof core.agentRuntimeArn === "string" ? core.agentRuntimeArn : "";
  const m = ARN.test(arn) ? PARTS.exec(arn) : null;
  if (m === null) {
    return {
      ok: false,
      field: `${FIELD}.agentRuntimeArn`,
      message: `${JSON.stringify(arn.slice(0, 120))} is not an agent runtime ARN (arn:aws:bedrock-agentcore:<region>:<12-digit account>:runtime/<runtime id>)`,
    };
  }
  const partition = m[1] as string;
  const region = m[2] as string;
  const qualifier = core.qualifier;
  if (qualifier !== undefined && (typeof qualifier !== "string" || !QUALIFIER.test(qualifier))) {
    return {
      ok: false,
      field: `${FIELD}.qualifier`,
      message: "must be an endpoint name or version: 1 to 64 letters, digits, _ or -",
    };
  }
  let endpoint: AgentCoreEndpoint = {
    tls: true,
    host: `${AGENT_CORE_SERVICE}.${region}.amazonaws.com${partition === "aws-cn" ? ".cn" : ""}`,
    port: 443,
  };
  if (override !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(override);
    } catch {
      url = undefined;
    }
    if (url === undefined || (url.protocol !== "https:" && url.protocol !== "http:") || url.hostname === "") {
      return {
        ok: false,
        field: FIELD,
        message: `the endpoint override of the Sluice process (AWS_ENDPOINT_URL_BEDROCK_AGENTCORE or AWS_ENDPOINT_URL) is not an http(s) URL`,
      };
    }
    const tls = url.protocol === "https:";
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    endpoint = { tls, host, port: url.port === "" ? (tls ? 443 : 80) : Number(url.port) };
  }
  const hostPart = endpoint.host.includes(":") ? `[${endpoint.host}]` : endpoint.host;
  const authority = endpoint.port === (endpoint.tls ? 443 : 80) ? hostPart : `${hostPart}:${endpoint.port}`;
  const path = `/runtimes/${encode(arn)}/invocations${typeof qualifier === "string" ? `?qualifier=${encode(qualifier)}` : ""}`;
  return { ok: true, ir: { backend, region, path, authority }, endpoint };
}

/** The connection every request to the runtime needs: TLS to the endpoint (when https) and the default plan. */
export function agentCoreConnection(ir: AgentCoreIR, endpoint: AgentCoreEndpoint): BackendConnectionIR {
  const plan = agentCorePlan(ir, undefined, undefined);
  return {
    ...(endpoint.tls ? { tls: { sni: endpoint.host, sans: [endpoint.host] } } : {}),
    ...(plan.ok ? { minted: plan.plan } : {}),
  };
}

export type AgentCorePlan =
  | { readonly ok: true; readonly plan: CredentialPlan; readonly notes: readonly CredentialProblem[] }
  | { readonly ok: false; readonly problems: readonly CredentialProblem[] };

/**
 * The credential plan of the runtime's requests: `auth` (the effective `backend.auth`, from a GwPolicy or the
 * GwBackend's own policies) in any form Sluice mints, a key or Secret included (Envoy's injector cannot rewrite the
 * path); without one, SigV4 with the default chain. A `cloudA` form signs for `bedrock-agentcore` in the ARN's region
 * unless it names its own.
 */
export function agentCorePlan(
  ir: AgentCoreIR,
  auth: { readonly value: unknown; readonly from: PolicySourceIR } | undefined,
  input: TranslationInput | undefined,
): AgentCorePlan {
  const invoke = { path: ir.path, authority: ir.authority, sessionHeader: AGENT_CORE_SESSION_HEADER };
  const sigv4 = (p?: MintPlan): MintPlan => ({
    kind: "cloudA",
    ...(p?.kind === "cloudA" ? p : {}),
    region: (p?.kind === "cloudA" ? p.region : undefined) ?? ir.region,
    service: (p?.kind === "cloudA" ? p.service : undefined) ?? AGENT_CORE_SERVICE,
    signedHeaders: SIGNED_HEADERS,
  });
  const id = (parts: unknown) =>
    createHash("sha256")
      .update(JSON.stringify(["agentCore", ir, parts]))
      .digest("hex")
      .slice(0, 20);
  if (auth === undefined) {
    const plan: CredentialPlan = {
      id: id("default"),
      backend: ir.backend,
      field: "backend.auth.cloudA",
      primary: sigv4(),
      extra: [],
      invoke,
    };
    return { ok: true, plan, notes: [] };
  }
  if (!isRec(auth.value))
    return { ok: false, problems: [{ field: "backend.auth", message: "not an object", fatal: true }] };
  const ns = auth.from.name.split("/")[0] ?? "";
  const r = resolveBackendAuth(auth.value, {
    input,
    ns,
    backend: ir.backend,
    source: `${auth.from.kind}/${auth.from.name}`,
    alwaysPlan: true,
  });
  if (r.native || r.plan === undefined || r.problems.some((p) => p.fatal)) return { ok: false, problems: r.problems };
  const p = r.plan;
  const primary = p.primary?.kind === "cloudA" ? sigv4(p.primary) : p.primary;
  return {
    ok: true,
    plan: { ...p, id: id(p.id), ...(primary !== undefined ? { primary } : {}), invoke },
    notes: r.problems,
  };
}

/** The GwBackend a cluster reaches, when it is an agent runtime. */
export function agentCoreOf(c: ClusterIR): AgentCoreIR | undefined {
  return c.kind === "dns" || c.kind === "static" ? c.agentCore : undefined;
}

/** `agentCorePlan` for a backend policy's `auth`, in the shape backend-connection.ts reads. */
export function agentCoreCredential(
  ir: AgentCoreIR,
  value: unknown,
  from: PolicySourceIR,
  input: TranslationInput | undefined,
): CredentialOutcome {
  const r = agentCorePlan(ir, { value, from }, input);
  if (r.ok) return { ok: true, minted: r.plan, notes: r.notes.map((p) => ({ from, ...p })) };
  const problems =
    r.problems.length > 0 ? r.problems : [{ field: "backend.auth", message: "no credential", fatal: true }];
  const fatal = problems.find((p) => p.fatal) ?? (problems[0] as CredentialProblem);
  const others = problems.filter((p) => p !== fatal).map((p) => `${p.field}: ${p.message}`);
  return {
    ok: false,
    from,
    field: fatal.field,
    message: [
      `${fatal.message}; requests to the agent runtime ${ir.backend} are answered 503 until it is`,
      ...others,
    ].join("; "),
    fatal: true,
  };
}
