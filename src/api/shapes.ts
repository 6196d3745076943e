// Structural checks for the Gateway API and core kinds: the type of every field Sluice reads (a list is a list, a
// mapping a mapping, a port a number). These kinds have no full schema here (their CRDs belong to the Gateway API
// and Kubernetes); without this, a document such as `rules: 3` reached translation and failed it for every resource.
// Fields Sluice does not read are not checked, and values are not checked beyond their type.

import { error, type Problem } from "./problems.js";

/** `"string"` etc.; a one-element array is a list of that shape; an object is a mapping with those fields. */
export type Shape = "string" | "number" | "boolean" | "scalar" | readonly [Shape] | { readonly [field: string]: Shape };

function typeName(v: unknown): string {
  if (Array.isArray(v)) return "a list";
  if (v === null) return "null";
  if (typeof v === "object") return "a mapping";
  return `a ${typeof v}`;
}

/** Problems of `value` against `shape`; absent (undefined or null) fields are fine. */
export function checkShape(value: unknown, shape: Shape, path: string, problems: Problem[]): void {
  if (value === undefined || value === null) return;
  if (typeof shape === "string") {
    const ok =
      shape === "scalar"
        ? typeof value === "string" || typeof value === "number" || typeof value === "boolean"
        : typeof value === shape;
    if (!ok)
      problems.push(
        error(path, `must be a ${shape === "scalar" ? "string or number" : shape}, not ${typeName(value)}`),
      );
    return;
  }
  if (Array.isArray(shape)) {
    if (!Array.isArray(value)) {
      problems.push(error(path, `must be a list, not ${typeName(value)}`));
      return;
    }
    value.forEach((item, i) => {
      if (item === null || item === undefined) problems.push(error(`${path}[${i}]`, "must not be empty"));
      else checkShape(item, shape[0] as Shape, `${path}[${i}]`, problems);
    });
    return;
  }
  if (typeof value !== "object" || Array.isArray(value)) {
    problems.push(error(path, `must be a mapping, not ${typeName(value)}`));
    return;
  }
  const record = value as Record<string, unknown>;
  for (const [field, s] of Object.entries(shape as Record<string, Shape>)) {
    checkShape(record[field], s, path === "" ? field : `${path}.${field}`, problems);
  }
}

const ref = {
  group: "string",
  kind: "string",
  name: "string",
  namespace: "string",
  sectionName: "string",
  port: "number",
} as const;
const headerFilter = {
  set: [{ name: "string", value: "string" }],
  add: [{ name: "string", value: "string" }],
  remove: ["string"],
} as const;
const routeFilter = {
  type: "string",
  requestHeaderModifier: headerFilter,
  responseHeaderModifier: headerFilter,
  requestRedirect: {
    scheme: "string",
    hostname: "string",
    path: { type: "string", replaceFullPath: "string", replacePrefixMatch: "string" },
    port: "number",
    statusCode: "number",
  },
  urlRewrite: { hostname: "string", path: { type: "string", replaceFullPath: "string", replacePrefixMatch: "string" } },
  requestMirror: { backendRef: ref, percent: "number", fraction: { numerator: "number", denominator: "number" } },
  extensionRef: ref,
} as const;
const backendRef = { ...ref, weight: "number", filters: [routeFilter] } as const;
const listener = {
  name: "string",
  hostname: "string",
  port: "number",
  protocol: "string",
  tls: { mode: "string", certificateRefs: [ref], options: {} },
  allowedRoutes: {
    namespaces: {
      from: "string",
      selector: { matchLabels: {}, matchExpressions: [{ key: "string", operator: "string", values: ["string"] }] },
    },
    kinds: [{ group: "string", kind: "string" }],
  },
} as const;

/** The fields Sluice reads, per kind; documents of these kinds are checked against them at load. */
export const KIND_SHAPES: Readonly<Record<string, Shape>> = {
  Gateway: {
    spec: { gatewayClassName: "string", listeners: [listener], addresses: [{ type: "string", value: "string" }] },
  },
  ListenerSet: { spec: { parentRef: ref, listeners: [listener] } },
  XListenerSet: { spec: { parentRef: ref, listeners: [listener] } },
  HTTPRoute: {
    spec: {
      parentRefs: [ref],
      hostnames: ["string"],
      rules: [
        {
          name: "string",
          matches: [
            {
              path: { type: "string", value: "string" },
              headers: [{ type: "string", name: "string", value: "string" }],
              queryParams: [{ type: "string", name: "string", value: "string" }],
              method: "string",
            },
          ],
          filters: [routeFilter],
          backendRefs: [backendRef],
          timeouts: { request: "string", backendRequest: "string" },
        },
      ],
    },
  },
  GRPCRoute: {
    spec: {
      parentRefs: [ref],
      hostnames: ["string"],
      rules: [
        {
          name: "string",
          matches: [
            {
              method: { type: "string", service: "string", method: "string" },
              headers: [{ type: "string", name: "string", value: "string" }],
            },
          ],
          filters: [routeFilter],
          backendRefs: [backendRef],
        },
      ],
    },
  },
  ReferenceGrant: {
    spec: {
      from: [{ group: "string", kind: "string", namespace: "string" }],
      to: [{ group: "string", kind: "string", name: "string" }],
    },
  },
  Service: {
    spec: {
      ports: [{ name: "string", port: "number", targetPort: "scalar", protocol: "string", appProtocol: "string" }],
    },
  },
  EndpointSlice: {
    addressType: "string",
    ports: [{ name: "string", port: "number", protocol: "string", appProtocol: "string" }],
    endpoints: [
      { addresses: ["string"], conditions: { ready: "boolean", serving: "boolean", terminating: "boolean" } },
    ],
  },
  Secret: { data: {}, stringData: {}, type: "string" },
  ConfigMap: { data: {} },
  Pod: { status: { podIP: "string", conditions: [{ type: "string", status: "string" }] } },
};
