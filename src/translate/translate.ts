// The translator: validated resources → status + IR → xDS, per Gateway. A pure function of its input.

import { translateGateways } from "./gateway/gateway.js";
import type { TranslationInput } from "./input.js";
import type { GatewayIR } from "./ir.js";
import { compileLlmTable, type LlmTable } from "./llm/table.js";
import { PolicyEngine, type PolicyReport } from "./policy/engine.js";
import type { ResourceStatus } from "./status/conditions.js";
import { buildXds } from "./xds/build.js";
import type { PolicyNote } from "./xds/filters/types.js";
import type { XdsResources } from "./xds/resources.js";

export interface TranslateOptions {
  /** File mode: a GatewayClass `sluice` is implied when the input defines no GatewayClass. */
  readonly impliedGatewayClass?: boolean;
}

export interface GatewayOutput {
  /** `namespace/name`; the xDS node group of the Envoys serving this Gateway. */
  readonly key: string;
  readonly ir: GatewayIR;
  readonly xds: XdsResources;
}

export interface TranslationResult {
  readonly gateways: readonly GatewayOutput[];
  readonly statuses: readonly ResourceStatus[];
  /** Effective policy per route rule and Gateway port, with provenance; what `sluice explain` prints. */
  readonly policies: PolicyReport;
  /** Policy table of the LLM ext_proc (routes to AI backends), content-addressed. */
  readonly llm: LlmTable;
}

export function translate(input: TranslationInput, opts: TranslateOptions = {}): TranslationResult {
  const policies = new PolicyEngine(input);
  const { gateways, statuses } = translateGateways(input, {
    impliedGatewayClass: opts.impliedGatewayClass ?? false,
    policies,
  });
  const llm = compileLlmTable(gateways, input);
  const built = gateways.map((ir) => ({
    ir,
    ...buildXds(ir, {
      llmEntries: new Map(
        [...llm.routes].filter(([k]) => k.startsWith(`${ir.key}|`)).map(([k, id]) => [k.slice(ir.key.length + 1), id]),
      ),
    }),
  }));
  return {
    gateways: built.map(({ ir, xds }) => ({ key: ir.key, ir, xds })),
    // Policy status comes last: it depends on which routes and backends the Gateways reached.
    statuses: [
      ...statuses,
      ...withNotes(
        policies.statuses(),
        built.flatMap((b) => b.notes),
      ),
    ],
    policies: policies.report(),
    llm,
  };
}

/**
 * Fields accepted but not applied (yet) become a `Warning` condition on every ancestor of the policy they came from,
 * so nothing is dropped silently. Notes about GwBackend-embedded policies go to the GwBackend's own status later.
 */
function withNotes(statuses: readonly ResourceStatus[], notes: readonly PolicyNote[]): ResourceStatus[] {
  if (notes.length === 0) return [...statuses];
  const byPolicy = new Map<string, string[]>();
  for (const n of notes) {
    if (n.from.kind !== "GwPolicy") continue;
    const list = byPolicy.get(n.from.name) ?? [];
    list.push(`${n.field}: ${n.message}`);
    byPolicy.set(n.from.name, list);
  }
  return statuses.map((s) => {
    const messages = s.kind === "GwPolicy" ? byPolicy.get(`${s.namespace}/${s.name}`) : undefined;
    if (messages === undefined) return s;
    const status = s.status as { ancestors: { conditions: unknown[] }[] };
    const warning = {
      type: "Warning",
      status: "True",
      reason: "NotYetSupported",
      message: [...new Set(messages)].sort().join("; "),
    };
    return {
      ...s,
      status: {
        ...status,
        ancestors: status.ancestors.map((a) => ({ ...a, conditions: [...a.conditions, warning].slice(0, 8) })),
      },
    };
  });
}
