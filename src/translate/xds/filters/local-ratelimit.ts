// traffic.rateLimit.local → envoy.filters.http.local_ratelimit, one instance per entry of the list (up to 16), each
// with its own token bucket on the route, so a request passes only if every limit has a token. Envoy answers 429.
// Buckets are per route and per Envoy instance (the spec's "per proxy instance, no coordination").

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { Traffic } from "../../../api/policy.js";
import type { Static } from "../../../api/schema-kit.js";
import { LocalRateLimitSchema } from "../../../gen/envoy/extensions/filters/http/local_ratelimit/v3/local_rate_limit_pb.js";
import { FractionalPercent_DenominatorType } from "../../../gen/envoy/type/v3/percent_pb.js";
import { durationFromMs } from "../../duration.js";
import { filterInstanceName } from "../../names.js";
import { phaseFields, phaseOrder } from "./policy-fields.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

type RateLimit = NonNullable<Static<typeof Traffic>["rateLimit"]>;

const FILTER = "envoy.filters.http.local_ratelimit";
const UNIT_MS = { Seconds: 1000, Minutes: 60_000, Hours: 3_600_000 } as const;
const ALWAYS = {
  defaultValue: { numerator: 100, denominator: FractionalPercent_DenominatorType.HUNDRED },
  runtimeKey: "sluice.local_ratelimit.enabled",
};

export const localRateLimitBuilder: HttpFilterBuilder = {
  id: "local_ratelimit",
  schemas: [LocalRateLimitSchema],
  forRoute(route, ctx) {
    const filters: FilterInstance[] = [];
    for (const f of phaseFields<RateLimit>(route, "rateLimit")) {
      (f.value.local ?? []).forEach((l, i) => {
        if (l.requests === undefined) {
          // Token limits are enforced by the Sluice LLM ext_proc (src/extproc/llm/token-limits.ts), which knows the
          // counts; a route that reaches no AI backend has no tokens to count.
          if (ctx.llmEntry?.(route.name) === undefined) {
            ctx.note(
              f.from,
              `rateLimit.local[${i}].tokens`,
              "token limits count LLM tokens; this route sends to no AI backend, so the limit is not applied",
              "Ignored",
            );
          }
          return;
        }
        const name = filterInstanceName(FILTER, `${f.phase === "preRouting" ? "pre" : ""}${i}`);
        const statPrefix = `sluice_local_ratelimit_${f.phase}_${i}`;
        const perRoute = create(LocalRateLimitSchema, {
          statPrefix,
          tokenBucket: {
            // burst is the bucket size: how many requests may pass at once after a quiet period.
            maxTokens: Math.max(1, l.burst ?? l.requests),
            tokensPerFill: l.requests,
            fillInterval: durationFromMs(UNIT_MS[l.unit]),
          },
          filterEnabled: ALWAYS,
          filterEnforced: { ...ALWAYS, runtimeKey: "sluice.local_ratelimit.enforced" },
        });
        filters.push({
          name,
          order: phaseOrder(FilterOrder.localRateLimit, f.phase) + i / 100,
          config: anyPack(LocalRateLimitSchema, create(LocalRateLimitSchema, { statPrefix })),
          perRoute: anyPack(LocalRateLimitSchema, perRoute),
        });
      });
    }
    return filters.length === 0 ? undefined : { filters };
  },
};
