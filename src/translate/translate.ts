// The translator: validated resources → status + IR → xDS, per Gateway. A pure function of its input.

import { translateGateways } from "./gateway/gateway.js";
import type { TranslationInput } from "./input.js";
import type { GatewayIR } from "./ir.js";
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
}

export function translate(input: TranslationInput, opts: TranslateOptions = {}): TranslationResult {
  const { gateways, statuses } = translateGateways(input, { impliedGatewayClass: opts.impliedGatewayClass ?? false });
  return {
    gateways: gateways.map((ir) => ({ key: ir.key, ir, xds: buildXds(ir) })),
    statuses,
  };
}
