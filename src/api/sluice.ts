// The Sluice kinds (sluice.dev/v1alpha1): one definition per kind, from which come the TypeScript types (Static<>),
// the validator (./check.ts via ./kinds.ts), the CRDs (./crd.ts) and the reference docs (./docs.ts).

import { GwBackendSpec } from "./backend.js";
import { GwModelSpec } from "./model.js";
import { GwParametersSpec } from "./parameters.js";
import { GwPolicySpec } from "./policy.js";
import type { Resource } from "./resource.js";
import type { Static, TSchema } from "./schema-kit.js";
import {
  GwBackendStatus,
  type GwBackendStatus as GwBackendStatusT,
  GwModelStatus,
  type GwModelStatus as GwModelStatusT,
  GwPolicyStatus,
  type GwPolicyStatus as GwPolicyStatusT,
} from "./status.js";

export const SLUICE_GROUP = "sluice.dev";
export const SLUICE_VERSION = "v1alpha1";
export const SLUICE_API_VERSION = `${SLUICE_GROUP}/${SLUICE_VERSION}`;

export interface PrinterColumn {
  readonly name: string;
  readonly type: "string" | "integer" | "date";
  readonly jsonPath: string;
  readonly description?: string;
}

export interface SluiceKind {
  readonly kind: string;
  readonly plural: string;
  readonly listKind: string;
  readonly shortNames: readonly string[];
  readonly description: string;
  readonly spec: TSchema;
  readonly status?: TSchema;
  readonly columns: readonly PrinterColumn[];
  /** The spec document (1 or 2) that defines the kind, for the docs. */
  readonly specDocument: string;
}

const age: PrinterColumn = { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" };

export const SLUICE_KINDS: readonly SluiceKind[] = [
  {
    kind: "GwPolicy",
    plural: "gwpolicies",
    listKind: "GwPolicyList",
    shortNames: ["gwpol"],
    description:
      "GwPolicy attaches frontend, traffic and backend policies to Gateways, ListenerSets, Routes, Services and GwBackends.",
    spec: GwPolicySpec,
    status: GwPolicyStatus,
    columns: [
      {
        name: "Accepted",
        type: "string",
        jsonPath: '.status.ancestors[0].conditions[?(@.type=="Accepted")].status',
        description: "Accepted by the first ancestor.",
      },
      {
        name: "Attached",
        type: "string",
        jsonPath: '.status.ancestors[0].conditions[?(@.type=="Attached")].status',
        description: "Attached under the first ancestor.",
      },
      age,
    ],
    specDocument: "policy-api.md",
  },
  {
    kind: "GwBackend",
    plural: "gwbackends",
    listKind: "GwBackendList",
    shortNames: ["gwbe"],
    description:
      "GwBackend declares where traffic is sent: a static host or Unix socket, a dynamic forward proxy, LLM providers, MCP targets, an A2A endpoint or a cloud agent runtime.",
    spec: GwBackendSpec,
    status: GwBackendStatus,
    columns: [
      {
        name: "Accepted",
        type: "string",
        jsonPath: '.status.conditions[?(@.type=="Accepted")].status',
      },
      age,
    ],
    specDocument: "backend-model-api.md",
  },
  {
    kind: "GwModel",
    plural: "gwmodels",
    listKind: "GwModelList",
    shortNames: ["gwm"],
    description: "GwModel exposes a named model on gateways, mapped to a provider or to a virtual model.",
    spec: GwModelSpec,
    status: GwModelStatus,
    columns: [
      { name: "Provider", type: "string", jsonPath: ".spec.provider" },
      { name: "Visibility", type: "string", jsonPath: ".spec.visibility" },
      {
        name: "Accepted",
        type: "string",
        jsonPath: '.status.parents[0].conditions[?(@.type=="Accepted")].status',
      },
      age,
    ],
    specDocument: "backend-model-api.md",
  },
  {
    kind: "GwParameters",
    plural: "gwparameters",
    listKind: "GwParametersList",
    shortNames: ["gwparams"],
    description:
      "GwParameters configures how the data plane is provisioned for a gateway (referenced by GatewayClass or Gateway infrastructure parametersRef).",
    spec: GwParametersSpec,
    columns: [{ name: "Workload", type: "string", jsonPath: ".spec.workload.kind" }, age],
    specDocument: "backend-model-api.md",
  },
];

export type { GwBackendSpec, GwModelSpec, GwParametersSpec, GwPolicySpec };
export type GwPolicy = Resource<"GwPolicy", Static<typeof GwPolicySpec>> & { readonly status?: GwPolicyStatusT };
export type GwBackend = Resource<"GwBackend", Static<typeof GwBackendSpec>> & { readonly status?: GwBackendStatusT };
export type GwModel = Resource<"GwModel", Static<typeof GwModelSpec>> & { readonly status?: GwModelStatusT };
export type GwParameters = Resource<"GwParameters", Static<typeof GwParametersSpec>>;
export interface GwModelList {
  readonly apiVersion: string;
  readonly kind: "GwModelList";
  readonly items: readonly GwModel[];
}
