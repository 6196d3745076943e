// CustomResourceDefinitions (apiextensions.k8s.io/v1) of the Sluice kinds, derived from their schemas.

import { RULES, type Rule } from "./schema-kit.js";
import { SLUICE_GROUP, SLUICE_KINDS, SLUICE_VERSION, type SluiceKind } from "./sluice.js";

type Schema = Record<string, unknown>;

const COPIED = [
  "type",
  "description",
  "required",
  "enum",
  "minLength",
  "maxLength",
  "pattern",
  "minimum",
  "maximum",
  "minItems",
  "maxItems",
  "minProperties",
  "maxProperties",
  "default",
  "format",
  "anyOf",
  "x-kubernetes-int-or-string",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
] as const;

/** The structural openAPIV3Schema node for a schema of ours: standard keywords kept, `x-sluice-*` dropped. */
export function toStructural(schema: Schema): Schema {
  const out: Schema = {};
  for (const k of COPIED) {
    const v = schema[k];
    if (v === undefined) continue;
    if (k === "required" && Array.isArray(v) && v.length === 0) continue;
    if (k === "format" && v !== "int32" && v !== "int64") continue;
    out[k] = v;
  }
  const props = schema["properties"] as Record<string, Schema> | undefined;
  if (props !== undefined) {
    const p: Record<string, Schema> = {};
    for (const [name, s] of Object.entries(props)) p[name] = toStructural(s);
    out["properties"] = p;
  }
  const items = schema["items"] as Schema | undefined;
  if (items !== undefined) out["items"] = toStructural(items);
  const additional = schema["additionalProperties"];
  if (typeof additional === "object" && additional !== null && props === undefined)
    out["additionalProperties"] = toStructural(additional as Schema);
  const rules = schema[RULES] as readonly Rule[] | undefined;
  if (rules !== undefined && rules.length > 0) {
    out[RULES] = rules.map((r) => ({
      rule: r.rule,
      message: r.message,
      ...(r.fieldPath !== undefined ? { fieldPath: r.fieldPath } : {}),
    }));
  }
  return out;
}

export function crdFor(def: SluiceKind): Schema {
  const singular = def.kind.toLowerCase();
  const status =
    def.status !== undefined
      ? toStructural(def.status as unknown as Schema)
      : { type: "object", description: "Written by the controller.", "x-kubernetes-preserve-unknown-fields": true };
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: `${def.plural}.${SLUICE_GROUP}`,
      labels: { "app.kubernetes.io/part-of": "sluice" },
    },
    spec: {
      group: SLUICE_GROUP,
      names: {
        kind: def.kind,
        listKind: def.listKind,
        plural: def.plural,
        singular,
        shortNames: [...def.shortNames],
        categories: ["sluice"],
      },
      scope: "Namespaced",
      versions: [
        {
          name: SLUICE_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: def.columns.map((c) => ({ ...c })),
          schema: {
            openAPIV3Schema: {
              type: "object",
              description: def.description,
              required: ["spec"],
              properties: {
                apiVersion: { type: "string", description: "sluice.dev/v1alpha1" },
                kind: { type: "string", description: def.kind },
                metadata: { type: "object" },
                spec: toStructural(def.spec as unknown as Schema),
                status,
              },
            },
          },
        },
      ],
    },
  };
}

export function allCrds(): { readonly file: string; readonly crd: Schema }[] {
  return SLUICE_KINDS.map((def) => ({ file: `${SLUICE_GROUP}_${def.plural}.yaml`, crd: crdFor(def) }));
}
