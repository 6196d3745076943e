// A concrete model as the LLM table's provider entry (llm/table.ts LlmProviderEntry), so that the ext_proc reaches it
// through the same provider path as a GwBackend `ai` provider. Credentials are compiled by the LLM table's own
// compiler (passed in: the same rules and Secret lookups for both kinds).

import type { LlmProviderIR } from "../ir.js";
import { type LlmProviderEntry, type ProviderAuth, providerEntryBase } from "../llm/table.js";
import type { ConcreteModelIR } from "./ir.js";

/** Compiles a `policies.auth` value as written, in the model's namespace, for a provider of `kind` at `host`. */
export type AuthCompiler = (
  kind: LlmProviderIR["kind"],
  host: string,
  auth: unknown,
  namespace: string,
) => ProviderAuth;

/** The provider entry of a concrete model; undefined when it has no provider (its `unavailable` says why). */
export function modelProviderEntry(m: ConcreteModelIR, compileAuth: AuthCompiler): LlmProviderEntry | undefined {
  const p = m.provider;
  if (p === undefined) return undefined;
  const namespace = m.id.split("/")[0] ?? "";
  return {
    ...providerEntryBase(p),
    auth: compileAuth(p.kind, p.address, m.policies.auth, namespace),
    ai: m.policies.ai,
  };
}
