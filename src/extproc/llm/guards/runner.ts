// Runs the guards of one direction in order over the texts of a body: each guard sees the texts as the guards before
// it left them (masked), a rejection ends the chain with that guard's CustomResponse. Regex guards run synchronously
// (no promise on the hot path); webhook and remote guards are awaited, each bounded by a timeout, and a guard that
// cannot answer follows its failure mode (FailClosed unless the guard says FailOpen).

import { observeGuards } from "../../../observability/metrics.js";
import {
  GUARD_TIMEOUT_MS,
  GUARDS_BUDGET_MS,
  type GuardDirection,
  type GuardSpec,
  type RemoteGuardSpec,
} from "../../../translate/llm/guards.js";
import { RegexScanner, scannerFor } from "./regex.js";
import { GuardError, type GuardVerdict, type RemoteGuard } from "./types.js";
import { WebhookGuard } from "./webhook.js";

// The bounds are the translator's (it reports a `requestTimeout` above the budget).
export { GUARD_TIMEOUT_MS, GUARDS_BUDGET_MS };

export type GuardOutcome =
  | { readonly action: "pass" }
  | { readonly action: "mask"; readonly texts: readonly string[] }
  | { readonly action: "reject"; readonly guard: GuardSpec };

export interface GuardContext {
  /** The client request's headers (lower-case names). */
  readonly headers: ReadonlyMap<string, string>;
  /** CEL activation for webhook `headers` (request, llm, identity). */
  readonly vars: () => Record<string, unknown>;
  /** The client of a moderationA / guardrailsA / guardrailsB guard, when that kind is served. */
  readonly remote?: (spec: GuardSpec & RemoteGuardSpec) => RemoteGuard | undefined;
  readonly log: (line: string) => void;
  readonly now?: () => number;
}

/** The regex guard on `texts`: masked texts, a rejection, or undefined when nothing matched. */
function regexGuard(
  spec: GuardSpec & { kind: "regex" },
  direction: GuardDirection,
  texts: readonly string[],
): GuardVerdict | undefined {
  const scanner = scannerFor(spec);
  let out: string[] | undefined;
  for (let i = 0; i < texts.length; i++) {
    const t = texts[i] as string;
    const spans = scanner.scan(t);
    if (spans.length === 0) continue;
    if (direction === "request" && spec.action === "Reject") {
      return { action: "reject", reason: `${spec.path}: ${spans.map((s) => s.mask).join(", ")}` };
    }
    out ??= [...texts];
    out[i] = RegexScanner.apply(t, spans);
  }
  return out === undefined ? undefined : { action: "mask", texts: out };
}

function remoteOf(spec: GuardSpec, ctx: GuardContext): RemoteGuard | undefined {
  if (spec.kind === "webhook") return new WebhookGuard(spec, ctx.vars);
  if (spec.kind === "regex") return undefined;
  return ctx.remote?.(spec);
}

/** The guards `specs` of `direction` over `texts`. */
export function runGuards(
  direction: GuardDirection,
  specs: readonly GuardSpec[],
  texts: readonly string[],
  ctx: GuardContext,
): GuardOutcome | Promise<GuardOutcome> {
  const now = ctx.now ?? Date.now;
  const deadline = now() + GUARDS_BUDGET_MS;
  let current = texts;
  let masked = false;
  const step = (from: number): GuardOutcome | Promise<GuardOutcome> => {
    for (let i = from; i < specs.length; i++) {
      const spec = specs[i] as GuardSpec;
      if (spec.kind === "regex") {
        const v = regexGuard(spec, direction, current);
        if (v?.action === "reject") {
          ctx.log(`llm prompt guard: ${direction} rejected by ${v.reason}`);
          return { action: "reject", guard: spec };
        }
        if (v?.action === "mask") {
          current = v.texts;
          masked = true;
        }
        continue;
      }
      const guard = remoteOf(spec, ctx);
      // Not served yet (the status says NotYetSupported): nothing to ask.
      if (guard === undefined) continue;
      if (current.length === 0) continue;
      const failureMode = spec.kind === "webhook" ? spec.failureMode : "FailClosed";
      const bound = spec.kind === "webhook" ? GUARD_TIMEOUT_MS : (spec.config.timeoutMs ?? GUARD_TIMEOUT_MS);
      const timeout = Math.max(0, Math.min(bound, deadline - now()));
      const signal = AbortSignal.timeout(timeout);
      return guard
        .check({ direction, texts: current, headers: ctx.headers }, signal)
        .then(
          (v) => v,
          (e: unknown) => {
            const why = e instanceof GuardError || (e as Error).name === "AbortError" ? (e as Error).message : "failed";
            ctx.log(`llm prompt guard ${spec.path}: no verdict (${why}); ${failureMode}`);
            return failureMode === "FailOpen" ? ({ action: "pass" } as const) : undefined;
          },
        )
        .then((v): GuardOutcome | Promise<GuardOutcome> => {
          if (v === undefined || v.action === "reject") {
            // A remote guard's reason names categories or policies, never the text; a webhook's is its own words.
            const why = v !== undefined && spec.kind !== "webhook" ? `: ${v.reason}` : "";
            if (v !== undefined) ctx.log(`llm prompt guard: ${direction} rejected by ${spec.path}${why}`);
            return { action: "reject", guard: spec };
          }
          if (v.action === "mask") {
            current = v.texts;
            masked = true;
          }
          return step(i + 1);
        });
    }
    return masked ? { action: "mask", texts: current } : { action: "pass" };
  };
  const counted = (o: GuardOutcome): GuardOutcome => {
    observeGuards(direction, o.action, o.action === "reject" ? o.guard.kind : undefined);
    return o;
  };
  const out = step(0);
  return out instanceof Promise ? out.then(counted) : counted(out);
}
