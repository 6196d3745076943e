// The translator: validated resources → status + IR → xDS, per Gateway. A pure function of its input.

import type { CredentialPlan } from "../credentials/plan.js";
import type { PolicyTable } from "../extauthz/server.js";
import type { AuthorizationPath } from "./authz/plan.js";
import { PolicyTableBuilder } from "./authz/policy-table.js";
import { withAiPolicyTls } from "./backend/ai-policy-tls.js";
import { withProviderConnections } from "./backend/ai-provider-connection.js";
import { translateGateways } from "./gateway/gateway.js";
import type { TranslationInput } from "./input.js";
import type { BackendTlsIR, GatewayIR, LlmClusterIR } from "./ir.js";
import { planLlmStages } from "./llm/stages.js";
import { compileLlmTable, failOpenPools, type LlmTable, llmBackendProblems } from "./llm/table.js";
import { compileMcpTable, type McpTable } from "./mcp/table.js";
import type { TranslationMemo } from "./memo.js";
import { type ModelTranslation, translateModels } from "./model/models.js";
import { serveModels } from "./model/serve.js";
import { PolicyEngine, type PolicyReport } from "./policy/engine.js";
import type { ResourceStatus } from "./status/conditions.js";
import { sluiceKindStatuses } from "./status/sluice-kinds.js";
import { buildXds } from "./xds/build.js";
import type { PolicyNote } from "./xds/filters/types.js";
import type { XdsResources } from "./xds/resources.js";

export interface TranslateOptions {
  /** File mode: a GatewayClass `sluice` is implied when the input defines no GatewayClass. */
  readonly impliedGatewayClass?: boolean;
  /**
   * File mode (default true): a Gateway's listeners bind the first value of its `spec.addresses` (the host Envoy runs
   * on has it). In a cluster (false) `spec.addresses` asks for the Envoy Service's address, which a pod never has:
   * listeners bind every address (0.0.0.0).
   */
  readonly listenOnGatewayAddress?: boolean;
  /**
   * `auto` (default): authorization rules that compile to Envoy RBAC run natively, the rest in Sluice's ext_authz.
   * `sluice`: every authorization rule runs in Sluice's ext_authz (tests compare the two paths with it).
   */
  readonly authorizationPath?: AuthorizationPath;
  /**
   * What earlier translations of a sequence left for this one; makes a translation after a small change cheap and
   * changes nothing in its result. Give the same memo to each translation of the sequence.
   */
  readonly memo?: TranslationMemo;
  /**
   * Where GwBackend `cloudA.agentCore` runtimes are reached instead of their regional endpoint: the Sluice process's
   * AWS_ENDPOINT_URL_BEDROCK_AGENTCORE or AWS_ENDPOINT_URL (cli/load.ts reads them; backend/agent-core.ts).
   */
  readonly agentCoreEndpoint?: string;
}

export interface GatewayOutput {
  /** `namespace/name`; the xDS node group of the Envoys serving this Gateway. */
  readonly key: string;
  readonly ir: GatewayIR;
  readonly xds: XdsResources;
  /** Backend credentials Sluice's credential ext_proc mints for this Gateway (src/credentials/). */
  readonly credentialPlans?: readonly CredentialPlan[];
  /** The AI clusters and their route-level variants as Envoy reaches them (xds/build.ts): the Realtime relay's. */
  readonly llmClusters?: readonly LlmClusterIR[];
  /** The backend policy TLS of its OTLP collectors' clusters, by cluster name, for Sluice's span relay. */
  readonly collectorTls?: ReadonlyMap<string, BackendTlsIR>;
}

export interface TranslationResult {
  readonly gateways: readonly GatewayOutput[];
  readonly statuses: readonly ResourceStatus[];
  /** Effective policy per route rule and Gateway port, with provenance; what `sluice explain` prints. */
  readonly policies: PolicyReport;
  /** Compiled ext_authz policies by content-hash id, referenced from the xDS (`sluice.policy`); immutable. */
  readonly extAuthzPolicies: PolicyTable;
  /** Policy table of the LLM ext_proc (routes to AI backends), content-addressed. */
  readonly llm: LlmTable;
  /** Targets of the MCP backends each Gateway's routes reach, for Sluice's MCP service (src/mcp/). */
  readonly mcp: McpTable;
}

export function translate(input: TranslationInput, opts: TranslateOptions = {}): TranslationResult {
  const memo = opts.memo;
  const path = opts.authorizationPath ?? "auto";
  const listenOnGatewayAddress = opts.listenOnGatewayAddress ?? true;
  memo?.begin(input, [opts.impliedGatewayClass ?? false, path, listenOnGatewayAddress, opts.agentCoreEndpoint ?? ""]);
  const policies = new PolicyEngine(input, memo?.policies);
  const { gateways: translated, statuses } = translateGateways(input, {
    impliedGatewayClass: opts.impliedGatewayClass ?? false,
    listenOnGatewayAddress,
    policies,
    ...(memo !== undefined ? { memo } : {}),
    ...(opts.agentCoreEndpoint !== undefined ? { agentCoreEndpoint: opts.agentCoreEndpoint } : {}),
  });
  // A GwPolicy's tls and tunnel for AI providers, before the LLM table and the xDS both read the providers.
  // And each provider's own tcp and http (a hop of its own in Envoy where they differ from its cluster's).
  const gateways = withProviderConnections(withAiPolicyTls(translated, input));
  const table = new PolicyTableBuilder();
  const authz = { input, path, table } as const;
  const stages = planLlmStages(gateways);
  const routesLlm = compileLlmTable(gateways, input, stages);
  const mcp = compileMcpTable(gateways, input);
  // GwModels: their clusters and routes join the Gateways after the HTTPRoutes' (path first), with their own entries.
  const models = translateModels(input, { impliedGatewayClass: opts.impliedGatewayClass ?? false });
  const served = serveModels(gateways, models.tables, input, (gw, l) => policies.listenerTraffic(gw, l));
  const llm: LlmTable = {
    entries: new Map([...routesLlm.entries, ...served.entries]),
    routes: new Map([...routesLlm.routes, ...served.routes]),
    notes: routesLlm.notes,
    // GwModels' clusters included.
    pools: failOpenPools(served.gateways),
  };
  const built = served.gateways.map((ir) => ({
    ir,
    ...buildXds(ir, {
      authz,
      llmUpstreamClusters: new Set([...(stages.upstream.get(ir.key) ?? []), ...(served.clusters.get(ir.key) ?? [])]),
      llmEntries: new Map(
        [...llm.routes].filter(([k]) => k.startsWith(`${ir.key}|`)).map(([k, id]) => [k.slice(ir.key.length + 1), id]),
      ),
      ...(memo !== undefined ? { memo: memo.xds } : {}),
    }),
  }));

  // Policy status comes last: it depends on which routes and backends the Gateways reached.
  const allStatuses = [
    ...statuses,
    ...withNotes(
      [
        ...policies.statuses(),
        ...sluiceKindStatuses(input, undefined, llmBackendProblems(routesLlm), withModelNotes(models, served.notes)),
      ],
      [...built.flatMap((b) => b.notes), ...llm.notes, ...mcp.notes],
    ),
  ];
  const finalStatuses = memo?.sameStatuses(allStatuses) ?? allStatuses;
  memo?.end();
  let report: PolicyReport | undefined;
  return {
    gateways: built.map(({ ir, xds, credentialPlans, llmClusters, collectorTls }) => ({
      key: ir.key,
      ir,
      xds,
      credentialPlans,
      llmClusters,
      ...(collectorTls.size > 0 ? { collectorTls } : {}),
    })),
    statuses: finalStatuses,
    // Only `sluice explain` reads the report; sorting every route site on each reload would be wasted.
    get policies() {
      report ??= policies.report();
      return report;
    },
    extAuthzPolicies: table.build(),
    llm,
    mcp,
  };
}

/** The translation with what serving added to each model's notes (fields it serves only in part). */
function withModelNotes(
  t: ModelTranslation,
  notes: ReadonlyMap<string, readonly { field: string; message: string }[]>,
): ModelTranslation {
  if (notes.size === 0) return t;
  const models = new Map(
    [...t.models].map(([id, p]) => [id, notes.has(id) ? { ...p, notes: [...p.notes, ...(notes.get(id) ?? [])] } : p]),
  );
  return { ...t, models };
}

/** Where a GwBackend's own policy field is written: `spec.policies.<field>`, or a provider's / MCP target's own. */
function gwBackendField(from: PolicyNote["from"], field: string): string {
  const rest = field.replace(/^backend\./, "");
  const sub = from.level === "subBackend" ? / (provider|target) (\S+)$/.exec(from.target) : null;
  if (sub === null) return `spec.policies.${rest}`;
  return sub[1] === "provider"
    ? `spec.ai.groups[].providers[${sub[2]}].policies.${rest}`
    : `spec.mcp.targets[${sub[2]}].static.policies.${rest}`;
}

/** Most telling first: a Warning condition carries one reason, the messages of all. */
const REASON_ORDER = ["NeverMatches", "Ignored", "NotYetSupported", "Deprecated"] as const;

/**
 * Notes become a `Warning` condition on every ancestor of the policy they came from, so nothing is dropped silently:
 * fields accepted but not applied (NotYetSupported), entries left out (Ignored), expressions that can never match,
 * such as rules reading `jwt` where no JWT authentication applies (NeverMatches; the policy stays Accepted and
 * Attached, as the spec requires). Notes about a GwBackend's own policies (spec.policies) are a Warning on its status.
 */
function withNotes(statuses: readonly ResourceStatus[], notes: readonly PolicyNote[]): ResourceStatus[] {
  if (notes.length === 0) return [...statuses];
  // By `<kind> <namespace/name>` of the resource the policy came from: a GwPolicy, or a GwBackend's own policies.
  const bySource = new Map<string, { messages: string[]; reasons: Set<string> }>();
  for (const n of notes) {
    const key = `${n.from.kind} ${n.from.name}`;
    const entry = bySource.get(key) ?? { messages: [], reasons: new Set<string>() };
    // A GwBackend's policies are under spec.policies (a provider's or MCP target's own under it, named by the
    // sub-backend); a GwPolicy's fields are named by their section already.
    const field = n.from.kind === "GwBackend" ? gwBackendField(n.from, n.field) : n.field;
    entry.messages.push(`${field}: ${n.message}`);
    entry.reasons.add(n.reason ?? "NotYetSupported");
    bySource.set(key, entry);
  }
  const warningOf = (entry: { messages: string[]; reasons: Set<string> }) => ({
    type: "Warning",
    status: "True",
    reason: REASON_ORDER.find((r) => entry.reasons.has(r)) ?? "NotYetSupported",
    message: [...new Set(entry.messages)].sort().join("; "),
  });
  return statuses.map((s) => {
    const entry =
      s.kind === "GwPolicy" || s.kind === "GwBackend" ? bySource.get(`${s.kind} ${s.namespace}/${s.name}`) : undefined;
    if (entry === undefined) return s;
    const warning = warningOf(entry);
    if (s.kind === "GwBackend") {
      const status = s.status as { conditions?: { type?: string }[] };
      if (status.conditions === undefined) return s;
      return {
        ...s,
        status: { ...status, conditions: [...status.conditions.filter((c) => c.type !== "Warning"), warning] },
      };
    }
    const status = s.status as { ancestors: { conditions: { type?: string }[] }[] };
    return {
      ...s,
      status: {
        ...status,
        ancestors: status.ancestors.map((a) => ({
          ...a,
          conditions: [...a.conditions.filter((c) => c.type !== "Warning"), warning].slice(0, 8),
        })),
      },
    };
  });
}
