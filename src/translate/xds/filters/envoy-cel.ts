// Spec CEL → Envoy's own CEL (the attribute vocabulary of envoy.rate_limit_descriptors.expr and friends), for
// expressions that mean the same thing in both: `request.*` reads are the same attributes, `jwt.<claim>` is the
// jwt_authn payload in dynamic metadata and, where the Sluice LLM ext_proc has run first (`llm: true`),
// `llm.requestModel` and `llm.streaming` are what it wrote to dynamic metadata. Anything else (source.address is an IP
// here and `ip:port` in Envoy, apiKey, token counts, ...) returns undefined and the caller reports it.

import { compileExpression, referencedVariables, specEnvironmentWith } from "../../../cel/env.js";
import { JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY } from "../../../cel/rbac.js";
import { EXTAUTHZ_METADATA_NAMESPACE } from "../../../extauthz/user-ext-auth.js";
import { LLM_METADATA_FIELDS } from "../../../extproc/llm-metadata.js";
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

/**
 * The `llm` fields the LLM ext_proc leaves in dynamic metadata once the response is done (completion.ts), for
 * expressions evaluated when the stream ends (access logs, span tags, metric labels).
 */
const LLM_END_FIELDS = LLM_METADATA_FIELDS;
const API_KEY_MEMBER = /\bapiKey\.([A-Za-z_][A-Za-z0-9_]*)/g;
const SOURCE_ADDRESS = /\bsource\s*\.\s*address\b/g;
/** Spec functions Envoy's CEL does not have (the IP and CIDR library). */
const SPEC_ONLY_FUNCTIONS =
  /\b(cidr|ip|containsIP|containsCIDR|isCanonical|family|isLoopback|isUnspecified|isGlobalUnicast|isLinkLocalMulticast|isLinkLocalUnicast|masked|prefixLength)\s*\(/;

/**
 * `atEnd`: the expression is evaluated when the stream is done (an access log, a span tag, a metric label), where
 * Envoy also knows `response` (code, headers: the spec's names), `source.port`, the API key's metadata Sluice's
 * ext_authz left (`apiKey.<field>`) and every `llm` field the LLM ext_proc left; `source.address` becomes the
 * peer's IP as a string (Envoy's is `ip:port`), so it is refused where the spec's IP functions read it.
 */
export function toEnvoyCel(
  expr: string,
  opts: { readonly llm?: boolean; readonly atEnd?: boolean; readonly queryParams?: boolean } = {},
): string | undefined {
  const compiled = compileExpression(expr, opts.atEnd === true ? END_ENVIRONMENT : undefined);
  if (!("ok" in compiled)) return undefined;
  const vars = referencedVariables(compiled.ok);
  const atEnd = opts.atEnd === true;
  const allowed = (v: string) =>
    v === "request" ||
    v === "jwt" ||
    (v === "llm" && (opts.llm === true || atEnd)) ||
    (atEnd && (v === "response" || v === "source" || v === "apiKey"));
  for (const v of vars) if (!allowed(v)) return undefined;
  if (atEnd && SPEC_ONLY_FUNCTIONS.test(withoutStrings(expr))) return undefined;
  // The spec's request.query is a map; Envoy's is the raw query string. With string functions, one parameter read by
  // a literal name is cut out of it (undecoded); any other use is refused.
  const rest = opts.queryParams === true ? rewriteQueryParams(expr, () => "0") : expr;
  if (/\brequest\s*\.\s*query\b/.test(withoutStrings(rest))) return undefined;
  const text = opts.queryParams === true ? rewriteQueryParams(expr, queryParamCel) : expr;
  // The spec's request.path has no query; Envoy's has it (a descriptor keyed on it would change with the query, so a
  // client could leave a path's limit by adding one). Envoy's url_path is the spec's path.
  let rewritten = outsideStrings(text, REQUEST_PATH, "request.url_path");
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
      const key = (atEnd ? LLM_END_FIELDS : LLM_REQUEST_FIELDS)[field];
      if (key === undefined) unknown = true;
      return key === undefined ? m : `metadata.filter_metadata['${LLM_METADATA_NAMESPACE}']['${key}']`;
    });
    if (unknown || /\bllm\b/.test(withoutStrings(rewritten))) return undefined;
  }
  if (vars.has("apiKey")) {
    rewritten = mapOutsideStrings(rewritten, (code) =>
      code.replace(
        API_KEY_MEMBER,
        (_m, field: string) => `metadata.filter_metadata['${EXTAUTHZ_METADATA_NAMESPACE}']['apiKey']['${field}']`,
      ),
    );
    if (/\bapiKey\b/.test(withoutStrings(rewritten))) return undefined;
  }
  if (vars.has("source")) {
    // Envoy's source.address is `ip:port` (`[ip]:port` for IPv6): the part before the last colon, unbracketed.
    rewritten = outsideStrings(
      rewritten,
      SOURCE_ADDRESS,
      "source.address.substring(0, source.address.lastIndexOf(':')).replace('[', '').replace(']', '')",
    );
  }
  return rewritten;
}

/** The spec's variables plus `response`, for expressions evaluated when the stream is done. */
const END_ENVIRONMENT = specEnvironmentWith(["response"]);

/** Functions Envoy's CEL has only with a `cel_config` turning them on (string conversion and the strings extension). */
const CONFIGURED_FUNCTIONS =
  /\b(string|lastIndexOf|indexOf|substring|replace|split|lowerAscii|upperAscii|trim|join|charAt|format|quote|reverse)\s*\(/;

/** Whether Envoy CEL text calls a function Envoy's default CEL configuration lacks. */
export const needsCelConfig = (envoyCel: string): boolean => CONFIGURED_FUNCTIONS.test(withoutStrings(envoyCel));

/**
 * For CEL that Envoy evaluates with its default configuration (span custom tags, stat tags, the tracing sampler), which
 * fails to load an expression calling a function the configuration would turn on: undefined for those. An outermost
 * `string(...)` is dropped, as the formatter writes every value as text.
 */
export function toDefaultEnvoyCel(expr: string, opts: { readonly atEnd?: boolean } = {}): string | undefined {
  const outer = /^\s*string\s*\(([\s\S]*)\)\s*$/.exec(expr)?.[1];
  const inner = outer !== undefined && "ok" in compileExpression(outer, END_ENVIRONMENT) ? outer : expr;
  const rewritten = toEnvoyCel(inner, opts);
  if (rewritten === undefined || CONFIGURED_FUNCTIONS.test(withoutStrings(rewritten))) return undefined;
  return rewritten;
}

/** A formatter value for a spec expression evaluated at the end of the stream with Envoy's default CEL. */
export function endFormat(expr: string): string | undefined {
  // The spec's source.address alone is the peer's IP: Envoy's command operator, no string function needed.
  if (/^\s*(string\s*\(\s*)?source\s*\.\s*address\s*\)?\s*$/.test(expr))
    return "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%";
  const e = toDefaultEnvoyCel(expr, { atEnd: true });
  return e === undefined ? undefined : `%CEL(${e})%`;
}

/** `request.query['name']` / `request.query.name` with a literal name (unreserved characters only). */
const QUERY_PARAM =
  /\brequest\s*\.\s*query\s*(?:\[\s*'([A-Za-z0-9_.~-]+)'\s*\]|\[\s*"([A-Za-z0-9_.~-]+)"\s*\]|\.\s*([A-Za-z_][A-Za-z0-9_]*))/g;

/**
 * Each `request.query['k']` → the value of the first `k=` parameter of Envoy's raw query string (string functions:
 * indexOf, substring), not percent-decoded; absent, a lookup that fails (`{}['k']`), as the spec's map lookup does.
 * Scans the whole text: string literals are skipped by matching them first.
 */
function rewriteQueryParams(text: string, by: (name: string) => string): string {
  return text.replace(
    new RegExp(`'(?:[^'\\\\]|\\\\.)*'|"(?:[^"\\\\]|\\\\.)*"|${QUERY_PARAM.source}`, "g"),
    (m, a?: string, b?: string, c?: string) => {
      const k = a ?? b ?? c;
      return k === undefined ? m : by(k);
    },
  );
}

function queryParamCel(k: string): string {
  const q = "('&' + request.query + '&')";
  const at = `${q}.indexOf('&${k}=')`;
  const from = `${at} + ${k.length + 2}`;
  return `(${at} < 0 ? {}['${k}'] : ${q}.substring(${from}, ${q}.indexOf('&', ${from})))`;
}
