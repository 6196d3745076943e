// The string formats of `x-sluice-format` that only Sluice checks (Kubernetes CEL cannot parse a CEL expression or a
// regular expression held in a string): each is read here as the component that uses it reads it, so `sluice validate`
// refuses what the translator would otherwise report in status and leave out.

import { parseDuration, parseTimestamp } from "../extauthz/decision-cache.js";
import { parseDurationMs } from "../translate/duration.js";
import { linearRegex } from "../translate/llm/linear-regex.js";
import { celSyntaxError } from "./cel-syntax.js";

export const STRING_FORMATS = [
  "cel",
  "uri-http",
  /** A prompt guard pattern: the linear-time RE2-like subset the LLM ext_proc compiles (translate/llm/linear-regex). */
  "regex",
  /** `delay.duration`: a duration string, else a CEL expression (translate/xds/filters/route-scoped). */
  "cel-or-duration",
  /** `extAuth.cache.ttl`: a duration, an RFC 3339 timestamp, else a CEL expression (extauthz/decision-cache). */
  "cel-duration-or-timestamp",
  /** `jwks.inline`: a JSON object whose `keys` is a list (RFC 7517); whether a key is usable is the status's. */
  "jwks",
] as const;
export type StringFormat = (typeof STRING_FORMATS)[number];

/** Why `value` is not of `format`, or undefined when it is (and for formats checked elsewhere). */
export function formatError(format: unknown, value: string): string | undefined {
  switch (format) {
    case "cel": {
      const e = celSyntaxError(value);
      return e === undefined ? undefined : `invalid CEL expression: ${e}`;
    }
    case "regex": {
      const r = linearRegex(value);
      return "error" in r
        ? `invalid pattern: ${r.error} (patterns use the RE2-like subset: no lookaround, no backreferences, small counted repetitions)`
        : undefined;
    }
    case "cel-or-duration": {
      if (parseDurationMs(value.trim()) !== undefined) return undefined;
      const e = celSyntaxError(value);
      return e === undefined ? undefined : `must be a duration such as 500ms or 2s, or a CEL expression: ${e}`;
    }
    case "cel-duration-or-timestamp": {
      if (parseDuration(value) !== undefined || parseTimestamp(value) !== undefined) return undefined;
      const e = celSyntaxError(value);
      return e === undefined
        ? undefined
        : `must be a duration such as 5m, an RFC 3339 timestamp, or a CEL expression: ${e}`;
    }
    case "jwks":
      return jwksError(value);
    default:
      return undefined;
  }
}

function jwksError(value: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (e) {
    return `invalid JSON Web Key Set: not JSON: ${(e as Error).message}`;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return "invalid JSON Web Key Set: must be a JSON object";
  }
  const keys = (parsed as { keys?: unknown }).keys;
  return keys === undefined || Array.isArray(keys) ? undefined : 'invalid JSON Web Key Set: "keys" must be a list';
}
