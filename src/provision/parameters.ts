// Which GwParameters apply to a Gateway, and how class-level and Gateway-level parameters combine
// (backend-model-api.md, GwParameters): class-level typed fields, then Gateway-level typed fields, then class-level
// overlays, then Gateway-level overlays, the Gateway level winning at each stage.

import type { Gateway, GatewayClass } from "../api/gateway-api.js";
import { error, type Problem, warning } from "../api/problems.js";
import { namespaceOf } from "../api/resource.js";
import type { GwParameters, GwParametersSpec } from "../api/sluice.js";
import { SLUICE_GROUP } from "../api/sluice.js";

/** The overlay fields of GwParameters, one per generated kind. */
export const OVERLAY_FIELDS = [
  "deployment",
  "daemonSet",
  "service",
  "serviceAccount",
  "podDisruptionBudget",
  "horizontalPodAutoscaler",
] as const;
export type OverlayField = (typeof OVERLAY_FIELDS)[number];

export type Overlay = NonNullable<GwParametersSpec["deployment"]>;

/** Typed fields: everything but the overlays. */
export type TypedParameters = Omit<GwParametersSpec, OverlayField>;

/** A problem of a GwParameters, found while resolving or rendering: the resource and the field path in it. */
export interface ParametersProblem extends Problem {
  /** `namespace/name` of the GwParameters the path is in, or undefined for the Gateway itself. */
  readonly parameters?: string;
}

/** One overlay in the order it is merged, with where it came from (for messages). */
export interface OverlayStep {
  readonly field: OverlayField;
  readonly overlay: Overlay;
  /** `namespace/name` of its GwParameters. */
  readonly from: string;
  readonly level: "class" | "gateway";
}

export interface EffectiveParameters {
  readonly typed: TypedParameters;
  /** Class-level overlays first, then Gateway-level ones. */
  readonly overlays: readonly OverlayStep[];
  /** Whether an overlay of this field was given at either level (PodDisruptionBudget / HPA exist only then). */
  readonly asked: ReadonlySet<OverlayField>;
  /** Which GwParameters (`namespace/name`) each typed field came from (the Gateway level's when both set it). */
  readonly origin: Readonly<Record<string, string>>;
  /** The GwParameters that took part, `namespace/name`. */
  readonly sources: readonly string[];
  readonly problems: readonly ParametersProblem[];
}

type Ref = { readonly group?: string; readonly kind?: string; readonly name: string; readonly namespace?: string };

function isParametersRef(ref: Ref | undefined): boolean {
  return ref !== undefined && ref.group === SLUICE_GROUP && ref.kind === "GwParameters";
}

type Lookup = (namespace: string, name: string) => GwParameters | undefined;

/**
 * Finds the GwParameters a GatewayClass and a Gateway name (a class-level reference needs a namespace; a
 * Gateway-level one is in the Gateway's namespace), and merges them. A reference that cannot be followed is a problem
 * of the Gateway: the Gateway is then not provisioned from guesses (fail closed).
 */
export function effectiveParameters(
  gateway: Gateway,
  gatewayClass: GatewayClass | undefined,
  lookup: Lookup,
): EffectiveParameters {
  const problems: ParametersProblem[] = [];
  const classRef = gatewayClass?.spec.parametersRef;
  const gwRef = gateway.spec.infrastructure?.parametersRef;
  let classParams: GwParameters | undefined;
  let gwParams: GwParameters | undefined;
  if (classRef !== undefined) {
    if (!isParametersRef(classRef))
      problems.push(
        error(
          "gatewayClass.spec.parametersRef",
          `GatewayClass ${gatewayClass?.metadata.name} names ${classRef.group}/${classRef.kind}; Sluice reads only sluice.dev/GwParameters`,
        ),
      );
    else if (classRef.namespace === undefined)
      problems.push(
        error(
          "gatewayClass.spec.parametersRef.namespace",
          "a GwParameters is namespaced: the GatewayClass reference needs a namespace",
        ),
      );
    else {
      classParams = lookup(classRef.namespace, classRef.name);
      if (classParams === undefined)
        problems.push(
          error(
            "gatewayClass.spec.parametersRef",
            `GwParameters ${classRef.namespace}/${classRef.name} named by GatewayClass ${gatewayClass?.metadata.name} does not exist`,
          ),
        );
    }
  }
  if (gwRef !== undefined) {
    if (!isParametersRef(gwRef))
      problems.push(
        error(
          "spec.infrastructure.parametersRef",
          `names ${gwRef.group}/${gwRef.kind}; Sluice reads only sluice.dev/GwParameters`,
        ),
      );
    else {
      gwParams = lookup(namespaceOf(gateway), gwRef.name);
      if (gwParams === undefined)
        problems.push(
          error(
            "spec.infrastructure.parametersRef",
            `GwParameters ${namespaceOf(gateway)}/${gwRef.name} does not exist`,
          ),
        );
    }
  }
  return mergeParameters(classParams, gwParams, problems);
}

const keyOf = (p: GwParameters) => `${namespaceOf(p)}/${p.metadata.name}`;

/** Class-level, then Gateway-level (pure; exported for the goldens). */
export function mergeParameters(
  classParams: GwParameters | undefined,
  gwParams: GwParameters | undefined,
  problems: ParametersProblem[] = [],
): EffectiveParameters {
  const c = classParams?.spec ?? {};
  const g = gwParams?.spec ?? {};
  if (c.modelCatalog !== undefined && classParams !== undefined)
    problems.push({
      ...warning(
        "spec.modelCatalog",
        "modelCatalog is read only from Gateway-level parameters (infrastructure.parametersRef); ignored at the class level",
      ),
      parameters: keyOf(classParams),
    });
  const typed: Record<string, unknown> = {};
  for (const field of ["workload", "logging", "image", "resources", "shutdown", "mesh", "rawConfig"] as const) {
    const merged = mergeTyped(c[field], g[field], field === "resources" || field === "shutdown");
    if (merged !== undefined) typed[field] = merged;
  }
  const env = mergeEnv(c.env, g.env);
  if (env !== undefined) typed["env"] = env;
  if (g.modelCatalog !== undefined) typed["modelCatalog"] = g.modelCatalog;
  const overlays: OverlayStep[] = [];
  const asked = new Set<OverlayField>();
  for (const [params, level] of [
    [classParams, "class"],
    [gwParams, "gateway"],
  ] as const) {
    if (params === undefined) continue;
    for (const field of OVERLAY_FIELDS) {
      const overlay = params.spec[field];
      if (overlay === undefined) continue;
      asked.add(field);
      overlays.push({ field, overlay, from: keyOf(params), level });
    }
  }
  const origin: Record<string, string> = {};
  for (const [params, spec] of [
    [classParams, c],
    [gwParams, g],
  ] as const) {
    if (params === undefined) continue;
    for (const field of Object.keys(spec)) origin[field] = keyOf(params);
  }
  return {
    typed: typed as TypedParameters,
    origin,
    overlays,
    asked,
    sources: [classParams, gwParams].flatMap((p) => (p !== undefined ? [keyOf(p)] : [])),
    problems,
  };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * A typed field of both levels: objects merge key by key (the Gateway's value wins at each leaf) so that, say, a
 * class-level image registry and a Gateway-level tag combine; `whole` fields (resources, shutdown) are taken whole
 * from the Gateway level when it sets them (a request without its limit would be a different request).
 */
function mergeTyped(classValue: unknown, gwValue: unknown, whole: boolean): unknown {
  if (gwValue === undefined) return classValue;
  if (classValue === undefined || whole) return gwValue;
  if (!isPlainObject(classValue) || !isPlainObject(gwValue)) return gwValue;
  const out: Record<string, unknown> = { ...classValue };
  for (const [k, v] of Object.entries(gwValue)) out[k] = mergeTyped(classValue[k], v, false);
  return out;
}

/** Environment variables by name: the Gateway level replaces a class-level variable of the same name. */
function mergeEnv(classEnv: TypedParameters["env"], gwEnv: TypedParameters["env"]): TypedParameters["env"] | undefined {
  if (classEnv === undefined) return gwEnv;
  if (gwEnv === undefined) return classEnv;
  const names = new Set(gwEnv.map((e) => e.name));
  return [...classEnv.filter((e) => !names.has(e.name)), ...gwEnv];
}
