// Spec CEL → Envoy's own CEL (the attribute vocabulary of envoy.rate_limit_descriptors.expr and friends), for
// expressions that mean the same thing in both: `request.*` reads are the same attributes, and `jwt.<claim>` is the
// jwt_authn payload in dynamic metadata. Anything else (source.address is an IP here and `ip:port` in Envoy,
// apiKey, llm, ...) returns undefined and the caller reports it.

import { compileExpression, referencedVariables } from "../../../cel/env.js";
import { JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY } from "../../../cel/rbac.js";

const JWT_MEMBER = /\bjwt\.([A-Za-z_][A-Za-z0-9_]*)/g;

export function toEnvoyCel(expr: string): string | undefined {
  const compiled = compileExpression(expr);
  if (!("ok" in compiled)) return undefined;
  const vars = referencedVariables(compiled.ok);
  for (const v of vars) if (v !== "request" && v !== "jwt") return undefined;
  if (!vars.has("jwt")) return expr;
  // Only `jwt.<claim>` member reads are rewritten; any other use of jwt (jwt['x'], has(jwt.x), jwt alone) is not.
  const rewritten = expr.replace(
    JWT_MEMBER,
    (_m, claim: string) => `metadata.filter_metadata['${JWT_METADATA_NAMESPACE}']['${JWT_PAYLOAD_KEY}']['${claim}']`,
  );
  return /\bjwt\b/.test(rewritten.replace(/'[^']*'|"[^"]*"/g, "")) ? undefined : rewritten;
}
