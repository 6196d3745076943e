// A Realtime session's responses charged to the route's global `Tokens` descriptors (translate/llm/realtime-tokens.ts):
// for each response.done, the relay sends the rate limit service what Envoy sends when an HTTP request's stream ends
// (xds/filters/global-ratelimit.ts): the descriptor's entries, their values the CEL expressions evaluated on the
// session's upgrade (request, source, the route's identity, llm.requestModel), and as hits the response's total tokens
// or its `cost`. An entry that fails leaves its descriptor out, as Envoy's expression descriptor does. The answer
// OVER_LIMIT means the budget is spent: the relay ends the session as for a local `tokens` limit. A service that
// cannot be reached loses that charge (logged), as an HTTP request's charge at its stream's end would be.

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { RateLimitDescriptorSchema } from "../../../gen/envoy/extensions/common/ratelimit/v3/ratelimit_pb.js";
import {
  RateLimitRequestSchema,
  RateLimitResponse_Code,
  RateLimitResponseSchema,
  RateLimitService,
} from "../../../gen/envoy/service/ratelimit/v3/rls_pb.js";
import { UnaryGrpcClient } from "../../../grpc/unary-client.js";
import type { TokenUsage } from "../../../llm/usage.js";
import type { RealtimeTokenLimit } from "../../../translate/llm/realtime-tokens.js";
import { evaluateText, toCel } from "../cel.js";
import { llmVariable } from "../completion.js";

const SHOULD_RATE_LIMIT = `/${RateLimitService.typeName}/ShouldRateLimit`;
/** As Envoy's ratelimit filter waits for the service (global-ratelimit.ts). */
const TIMEOUT_MS = 2000;

/** A descriptor entry's value as Envoy's expression descriptor gives it: text, a number or a boolean printed. */
function entryValue(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "bigint" || typeof v === "boolean") return String(v);
  return undefined;
}

export interface SessionCharge {
  /** CEL variables of the session's upgrade (request, source, the identity), `llm` aside. */
  readonly activation: Readonly<Record<string, unknown>>;
  readonly provider: string;
  readonly model: string | undefined;
}

export class RealtimeGlobalTokens {
  readonly #grpc = new UnaryGrpcClient();
  readonly #log: (line: string) => void;

  constructor(log: (line: string) => void) {
    this.#log = log;
  }

  close(): void {
    this.#grpc.close();
  }

  /** Charges one response's `usage` to every limit; whether a service answered OVER_LIMIT. Never rejects. */
  async charge(limits: readonly RealtimeTokenLimit[], usage: TokenUsage, s: SessionCharge): Promise<boolean> {
    const llm = llmVariable({
      streaming: true,
      provider: s.provider,
      ...(s.model !== undefined ? { requestModel: s.model } : {}),
      usage,
    });
    const request = { ...s.activation, llm: toCel(llm) };
    const over = await Promise.all(limits.map((l) => this.#one(l, usage, request)));
    return over.some((o) => o);
  }

  async #one(limit: RealtimeTokenLimit, usage: TokenUsage, activation: Record<string, unknown>): Promise<boolean> {
    const descriptors = limit.descriptors.flatMap((d) => {
      const entries: { key: string; value: string }[] = [];
      for (const e of d.entries) {
        const value = entryValue(evaluateText(e.expression, activation));
        if (value === undefined) return [];
        entries.push({ key: e.key, value });
      }
      let hits = usage.totalTokens;
      if (d.cost !== undefined) {
        const v = evaluateText(d.cost, activation);
        if (typeof v === "number" && Number.isFinite(v)) hits = Math.max(0, Math.ceil(v));
        else this.#log(`llm realtime relay: cost expression ${JSON.stringify(d.cost)} failed; counting total tokens`);
      }
      return [create(RateLimitDescriptorSchema, { entries, hitsAddend: BigInt(hits) })];
    });
    if (descriptors.length === 0) return false;
    const message = toBinary(
      RateLimitRequestSchema,
      create(RateLimitRequestSchema, { domain: limit.domain, descriptors }),
    );
    let last = "no ready endpoint";
    for (const target of limit.targets) {
      const r = await this.#grpc.call(target, SHOULD_RATE_LIMIT, message, {
        timeoutMs: TIMEOUT_MS,
        authority: limit.service.split(" ").at(-1) ?? "ratelimit",
      });
      if (!r.ok) {
        last = r.error;
        continue;
      }
      return fromBinary(RateLimitResponseSchema, r.message).overallCode === RateLimitResponse_Code.OVER_LIMIT;
    }
    this.#log(`llm realtime relay: rate limit service ${limit.service} (domain ${limit.domain}): ${last}; charge lost`);
    return false;
  }
}
