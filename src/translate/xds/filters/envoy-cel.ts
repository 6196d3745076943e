// Spec CEL → Envoy's own CEL (the attribute vocabulary of envoy.rate_limit_descriptors.expr and friends), for
// expressions that mean the same thing in both: `request.*` reads are the same attributes, `jwt.<claim>` is the
// jwt_authn payload in dynamic metadata and, where the Sluice LLM ext_proc has run first (`llm: true`),
// `llm.requestModel` and `llm.streaming` are what it wrote to dynamic metadata. Anything else (source.address is an IP
// here and `ip:port` in Envoy, apiKey, token counts, ...) returns undefined and the caller reports it.

import { compileExpression, referencedVariables } from "../../../cel/env.js";
import { JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY } from "../../../cel/rbac.js";
import { LLM_METADATA_KEYS, LLM_METADATA_NAMESPACE } from "../../llm/table.js";

const JWT_MEMBER = /\bjwt\.([A-Za-z_][A-Za-z0-9_]*)/g;
/** `llm` fields known when the request body has been read, and the metadata key the LLM ext_proc writes each to. */
const LLM_REQUEST_FIELDS: Readonly<Record<string, string>> = {
  requestModel: LLM_METADATA_KEYS.requestModel,
  streaming: LLM_METADATA_KEYS.streaming,
};
const LLM_MEMBER = /\bllm\.([A-Za-z_][A-Za-z0-9_]*)/g;

/** Whether the expression reads the variable `name` (`llm`, `request` ...) at all. */
export function readsVariable(expr: string, name: string): boolean {
  const compiled = compileExpression(expr);
  return "ok" in compiled && referencedVariables(compiled.ok).has(name);
}

export const readsLlm = (expr: string): boolean => readsVariable(expr, "llm");

const REQUEST_PATH = /\brequest\s*\.\s*path\b/g;
const STRING_OR_TOKEN = /'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^'"]+/g;

/** `text` with each part outside string literals passed through `f`, and each literal through `literal`. */
function mapOutsideStrings(text: string, f: (code: string) => string, literal = (s: string) => s): string {
  return text.replace(STRING_OR_TOKEN, (part) =>
    part.startsWith("'") || part.startsWith('"') ? literal(part) : f(part),
  );
}

const withoutStrings = (s: string) =>
  mapOutsideStrings(
    s,
    (code) => code,
    () => "",
  );
const outsideStrings = (text: string, pattern: RegExp, by: string) =>
  mapOutsideStrings(text, (code) => code.replace(pattern, by));

export function toEnvoyCel(expr: string, opts: { readonly llm?: boolean } = {}): string | undefined {
  const compiled = compileExpression(expr);
  if (!("ok" in compiled)) return undefined;
  const vars = referencedVariables(compiled.ok);
  for (const v of vars) if (v !== "request" && v !== "jwt" && !(v === "llm" && opts.llm === true)) return undefined;
  // The spec's request.query is a map; Envoy's is the raw query string.
  if (/\brequest\s*\.\s*query\b/.test(withoutStrings(expr))) return undefined;
  // The spec's request.path has no query; Envoy's has it (a descriptor keyed on it would change with the query, so a
  // client could leave a path's limit by adding one). Envoy's url_path is the spec's path.
  let rewritten = outsideStrings(expr, REQUEST_PATH, "request.url_path");
  if (vars.has("jwt")) {
    // Only `jwt.<claim>` member reads are rewritten; any other use of jwt (jwt['x'], has(jwt.x), jwt alone) is not.
    rewritten = rewritten.replace(
      JWT_MEMBER,
      (_m, claim: string) => `metadata.filter_metadata['${JWT_METADATA_NAMESPACE}']['${JWT_PAYLOAD_KEY}']['${claim}']`,
    );
    if (/\bjwt\b/.test(withoutStrings(rewritten))) return undefined;
  }
  if (vars.has("llm")) {
    let unknown = false;
    rewritten = rewritten.replace(LLM_MEMBER, (m, field: string) => {
      const key = LLM_REQUEST_FIELDS[field];
      if (key === undefined) unknown = true;
      return key === undefined ? m : `metadata.filter_metadata['${LLM_METADATA_NAMESPACE}']['${key}']`;
    });
    if (unknown || /\bllm\b/.test(withoutStrings(rewritten))) return undefined;
  }
  return rewritten;
}
