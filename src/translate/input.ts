// What the translator reads: validated resources grouped by kind. Built by the sources; never mutated.

import type { ConfigMap, EndpointSlice, Namespace, Pod, Secret, Service } from "../api/core.js";
import type {
  Gateway,
  GatewayClass,
  GRPCRoute,
  HTTPRoute,
  InferencePool,
  ListenerSet,
  ReferenceGrant,
} from "../api/gateway-api.js";
import type { Resource, SourceRef } from "../api/resource.js";
import type { GwBackend, GwModel, GwParameters, GwPolicy } from "../api/sluice.js";

export interface TranslationInput {
  readonly gatewayClasses: readonly GatewayClass[];
  readonly gateways: readonly Gateway[];
  readonly listenerSets: readonly ListenerSet[];
  readonly httpRoutes: readonly HTTPRoute[];
  readonly grpcRoutes: readonly GRPCRoute[];
  readonly referenceGrants: readonly ReferenceGrant[];
  readonly services: readonly Service[];
  readonly endpointSlices: readonly EndpointSlice[];
  readonly inferencePools: readonly InferencePool[];
  /** Read for the InferencePools with FailOpen only (their ready model servers). */
  readonly pods: readonly Pod[];
  readonly secrets: readonly Secret[];
  readonly configMaps: readonly ConfigMap[];
  readonly namespaces: readonly Namespace[];
  readonly backends: readonly GwBackend[];
  readonly policies: readonly GwPolicy[];
  readonly models: readonly GwModel[];
  readonly parameters: readonly GwParameters[];
  /** Where each resource came from, keyed by resourceKey(); absent for resources without a file. */
  readonly sources: ReadonlyMap<string, SourceRef>;
  /** Documents left out because they failed validation; the translator reports them in status. */
  readonly invalid: readonly InvalidResource[];
}

export interface InvalidResource {
  readonly kind: string;
  /** The document as written (kind and metadata.name are known strings). */
  readonly document: Resource;
  /** `path: message` of each error. */
  readonly problems: readonly string[];
}

type Bucket = {
  -readonly [K in keyof TranslationInput]: TranslationInput[K] extends readonly (infer T)[] ? T[] : never;
};

const BUCKET_OF_KIND: Readonly<Record<string, keyof Bucket>> = {
  GatewayClass: "gatewayClasses",
  Gateway: "gateways",
  ListenerSet: "listenerSets",
  XListenerSet: "listenerSets",
  HTTPRoute: "httpRoutes",
  GRPCRoute: "grpcRoutes",
  ReferenceGrant: "referenceGrants",
  Service: "services",
  EndpointSlice: "endpointSlices",
  InferencePool: "inferencePools",
  Pod: "pods",
  Secret: "secrets",
  ConfigMap: "configMaps",
  Namespace: "namespaces",
  GwBackend: "backends",
  GwPolicy: "policies",
  GwModel: "models",
  GwParameters: "parameters",
};

/**
 * Groups validated resources by kind; resources of kinds the translator does not read are ignored. `sources` may be
 * given as a function, called only if someone reads `input.sources`.
 */
export function makeInput(
  resources: Iterable<Resource>,
  sources: ReadonlyMap<string, SourceRef> | (() => ReadonlyMap<string, SourceRef>) = new Map(),
  invalid: readonly InvalidResource[] = [],
): TranslationInput {
  const b: Record<string, unknown[]> = {};
  for (const key of new Set(Object.values(BUCKET_OF_KIND))) b[key] = [];
  for (const r of resources) {
    const bucket = BUCKET_OF_KIND[r.kind];
    if (bucket !== undefined) b[bucket]?.push(r);
    // A GwModelList is its items.
    if (r.kind === "GwModelList") for (const item of (r as { items?: Resource[] }).items ?? []) b["models"]?.push(item);
  }
  if (typeof sources !== "function") return { ...(b as unknown as Bucket), sources, invalid };
  let known: ReadonlyMap<string, SourceRef> | undefined;
  return {
    ...(b as unknown as Bucket),
    get sources() {
      known ??= sources();
      return known;
    },
    invalid,
  };
}
