// Registry of the kinds Sluice reads: served apiVersions and the validator of each.
// Sluice kinds are checked against their full schema (./sluice.ts); Gateway API and core kinds get envelope checks
// (the translator checks what it reads of them).

import { checkValue } from "./check.js";
import { GATEWAY_API_GROUP, GATEWAY_API_X_GROUP, INFERENCE_GROUP } from "./gateway-api.js";
import { error, type Problem } from "./problems.js";
import type { Resource } from "./resource.js";
import { checkShape, KIND_SHAPES } from "./shapes.js";
import { SLUICE_API_VERSION, SLUICE_KINDS, type SluiceKind } from "./sluice.js";
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
  // The types of the fields Sluice reads (./shapes.ts).
  const shape = KIND_SHAPES[String(doc["kind"])];
  if (shape !== undefined) checkShape(doc, shape, "", problems);
  if (problems.length > 0) return { problems };
  return { resource: doc as unknown as Resource, problems };
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const ENVELOPE_FIELDS = new Set(["apiVersion", "kind", "metadata", "spec", "status"]);

function checkMetadata(meta: unknown, path: string, problems: Problem[]): void {
  if (!isRecord(meta)) {
    problems.push(error(path, "metadata is required and must be a mapping with a name"));
    return;
  }
  const name = meta["name"];
  if (typeof name !== "string" || name === "") problems.push(error(`${path}.name`, "metadata.name is required"));
  else if (name.length > 253 || !DNS_SUBDOMAIN.test(name))
    problems.push(
      error(
        `${path}.name`,
        `must be a lowercase DNS subdomain of at most 253 characters (got ${JSON.stringify(name)})`,
      ),
    );
  const ns = meta["namespace"];
  if (ns !== undefined && ns !== null && (typeof ns !== "string" || ns.length > 63 || !DNS_LABEL.test(ns)))
    problems.push(error(`${path}.namespace`, `must be a namespace name (got ${JSON.stringify(ns)})`));
  for (const field of ["labels", "annotations"]) {
    const m = meta[field];
    if (m === undefined || m === null) continue;
    if (!isRecord(m) || Object.values(m).some((v) => typeof v !== "string"))
      problems.push(error(`${path}.${field}`, `must be a mapping of strings to strings`));
  }
}

/** Validates a document of a Sluice kind (envelope already checked for kind and apiVersion). */
function validateSluice(def: SluiceKind, doc: Record<string, unknown>, prefix = ""): ValidationResult {
  const problems: Problem[] = [];
  const at = (p: string) => (prefix === "" ? p : `${prefix}.${p}`);
  for (const key of Object.keys(doc)) {
    if (!ENVELOPE_FIELDS.has(key))
      problems.push(error(at(key), `unknown field "${key}"; a resource has apiVersion, kind, metadata, spec`));
  }
  checkMetadata(doc["metadata"], at("metadata"), problems);
  let spec: unknown;
  if (!isRecord(doc["spec"])) problems.push(error(at("spec"), "spec is required and must be a mapping"));
  else spec = checkValue(def.spec as unknown as Record<string, unknown>, doc["spec"], at("spec"), problems);
  if (problems.some((p) => p.severity === "error")) return { problems };
  const resource = { ...doc, spec } as unknown as Resource;
  return { resource, problems };
}

function validateModelList(doc: Record<string, unknown>): ValidationResult {
  const model = SLUICE_KINDS.find((k) => k.kind === "GwModel")!;
  const items = doc["items"];
  if (!Array.isArray(items)) return { problems: [error("items", "items is required and must be a list of GwModel")] };
  const problems: Problem[] = [];
  const out: unknown[] = [];
  items.forEach((item, i) => {
    if (!isRecord(item)) {
      problems.push(error(`items[${i}]`, "must be a GwModel mapping"));
      return;
    }
    if (item["kind"] !== undefined && item["kind"] !== "GwModel")
      problems.push(error(`items[${i}].kind`, `must be GwModel (got ${JSON.stringify(item["kind"])})`));
    const r = validateSluice(model, { apiVersion: SLUICE_API_VERSION, kind: "GwModel", ...item }, `items[${i}]`);
    problems.push(...r.problems);
    if (r.resource !== undefined) out.push(r.resource);
  });
  if (problems.some((p) => p.severity === "error")) return { problems };
  return { resource: { ...doc, items: out } as unknown as Resource, problems };
}

const gw = `${GATEWAY_API_GROUP}/v1`;

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
    "GRPCRoute",
    { apiVersions: [gw, `${GATEWAY_API_GROUP}/v1alpha2`], namespaced: true, validate: (d) => envelopeOnly(d, true) },
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
  [
    "InferencePool",
    // Read only as the target of a custom LLM provider's backendRef, which checks the fields it uses.
    { apiVersions: [`${INFERENCE_GROUP}/v1`], namespaced: true, validate: (d) => envelopeOnly(d, true) },
  ],
  ["Service", { apiVersions: ["v1"], namespaced: true, validate: (d) => envelopeOnly(d, true) }],
  [
    "EndpointSlice",
    { apiVersions: ["discovery.k8s.io/v1"], namespaced: true, validate: (d) => envelopeOnly(d, false) },
  ],
  ["Secret", { apiVersions: ["v1"], namespaced: true, validate: (d) => envelopeOnly(d, false) }],
  // Read only as the model servers of an InferencePool with FailOpen (backend/ai.ts poolFallback).
  ["Pod", { apiVersions: ["v1"], namespaced: true, validate: (d) => envelopeOnly(d, false) }],
  ["ConfigMap", { apiVersions: ["v1"], namespaced: true, validate: (d) => envelopeOnly(d, false) }],
  ["Namespace", { apiVersions: ["v1"], namespaced: false, validate: (d) => envelopeOnly(d, false) }],
  ...SLUICE_KINDS.map((def): [string, KindDef] => [
    def.kind,
    { apiVersions: [SLUICE_API_VERSION], namespaced: true, validate: (d) => validateSluice(def, d) },
  ]),
  ["GwModelList", { apiVersions: [SLUICE_API_VERSION], namespaced: true, validate: validateModelList }],
]);
