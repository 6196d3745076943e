// The translator: validated resources → status + IR → xDS, per Gateway. A pure function of its input.

import { translateGateways } from "./gateway/gateway.js";
import type { TranslationInput } from "./input.js";
import type { GatewayIR } from "./ir.js";
import { PolicyEngine, type PolicyReport } from "./policy/engine.js";
import type { ResourceStatus } from "./status/conditions.js";
import { buildXds } from "./xds/build.js";
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
}

export function translate(input: TranslationInput, opts: TranslateOptions = {}): TranslationResult {
  const policies = new PolicyEngine(input);
  const { gateways, statuses } = translateGateways(input, {
    impliedGatewayClass: opts.impliedGatewayClass ?? false,
    policies,
  });
  return {
    gateways: gateways.map((ir) => ({ key: ir.key, ir, xds: buildXds(ir) })),
    // Policy status comes last: it depends on which routes and backends the Gateways reached.
    statuses: [...statuses, ...policies.statuses()],
    policies: policies.report(),
  };
}
