// Sluice kinds (sluice.dev/v1alpha1). Placeholder shapes for what the translator reads today;
// the schema-derived types replace these, keeping the exported names.

import type { Resource } from "./resource.js";

export const SLUICE_API_VERSION = "sluice.dev/v1alpha1";

export interface GwBackendSpec {
  readonly static?: { readonly host?: string; readonly port?: number; readonly unixPath?: string };
  readonly ai?: unknown;
  readonly mcp?: unknown;
  readonly a2a?: { readonly host: string; readonly port: number };
  readonly dynamicForwardProxy?: Record<string, never>;
  readonly cloudA?: unknown;
  readonly policies?: unknown;
}
export type GwBackend = Resource<"GwBackend", GwBackendSpec>;
export type GwPolicy = Resource<"GwPolicy", unknown>;
export type GwModel = Resource<"GwModel", unknown>;
export type GwParameters = Resource<"GwParameters", unknown>;
