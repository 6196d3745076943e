// Registry of the kinds Sluice reads: served apiVersions and the validator of each.
// Validators here check what the translator relies on; the full schemas of the Sluice kinds replace them.

import { GATEWAY_API_GROUP, GATEWAY_API_X_GROUP } from "./gateway-api.js";
import { error, type Problem } from "./problems.js";
import type { Resource } from "./resource.js";
import type { ValidationResult } from "./validate.js";

export interface KindDef {
  readonly apiVersions: readonly string[];
  readonly namespaced: boolean;
  validate(doc: Record<string, unknown>): ValidationResult;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function envelopeOnly(doc: Record<string, unknown>, specRequired: boolean): ValidationResult {
  const problems: Problem[] = [];
  if (specRequired && !isRecord(doc["spec"])) problems.push(error("spec", "spec is required and must be a mapping"));
  if (problems.length > 0) return { problems };
  return { resource: doc as unknown as Resource, problems };
}

const gw = `${GATEWAY_API_GROUP}/v1`;
const sluice = "sluice.dev/v1alpha1";

export const KINDS: ReadonlyMap<string, KindDef> = new Map<string, KindDef>([
  [
    "GatewayClass",
    { apiVersions: [gw, `${GATEWAY_API_GROUP}/v1beta1`], namespaced: false, validate: (d) => envelopeOnly(d, true) },
  ],
  [
    "Gateway",
    { apiVersions: [gw, `${GATEWAY_API_GROUP}/v1beta1`], namespaced: true, validate: (d) => envelopeOnly(d, true) },
  ],
  [
    "HTTPRoute",
    { apiVersions: [gw, `${GATEWAY_API_GROUP}/v1beta1`], namespaced: true, validate: (d) => envelopeOnly(d, true) },
  ],
  [
    "ListenerSet",
    { apiVersions: [gw, `${GATEWAY_API_X_GROUP}/v1alpha1`], namespaced: true, validate: (d) => envelopeOnly(d, true) },
  ],
  [
    "XListenerSet",
    { apiVersions: [`${GATEWAY_API_X_GROUP}/v1alpha1`], namespaced: true, validate: (d) => envelopeOnly(d, true) },
  ],
  [
    "ReferenceGrant",
    { apiVersions: [`${GATEWAY_API_GROUP}/v1beta1`, gw], namespaced: true, validate: (d) => envelopeOnly(d, true) },
  ],
  ["Service", { apiVersions: ["v1"], namespaced: true, validate: (d) => envelopeOnly(d, true) }],
  [
    "EndpointSlice",
    { apiVersions: ["discovery.k8s.io/v1"], namespaced: true, validate: (d) => envelopeOnly(d, false) },
  ],
  ["Secret", { apiVersions: ["v1"], namespaced: true, validate: (d) => envelopeOnly(d, false) }],
  ["ConfigMap", { apiVersions: ["v1"], namespaced: true, validate: (d) => envelopeOnly(d, false) }],
  ["Namespace", { apiVersions: ["v1"], namespaced: false, validate: (d) => envelopeOnly(d, false) }],
  ["GwPolicy", { apiVersions: [sluice], namespaced: true, validate: (d) => envelopeOnly(d, true) }],
  ["GwBackend", { apiVersions: [sluice], namespaced: true, validate: (d) => envelopeOnly(d, true) }],
  ["GwModel", { apiVersions: [sluice], namespaced: true, validate: (d) => envelopeOnly(d, true) }],
  ["GwParameters", { apiVersions: [sluice], namespaced: true, validate: (d) => envelopeOnly(d, true) }],
]);
