// traffic.rateLimit.global → envoy.filters.http.ratelimit calling the user's rate limit service (Envoy's RLS
// protocol) over gRPC. The service, domain and failure mode are listener-level in Envoy, so there is one instance per
// distinct (service, domain, failure mode); the descriptors go on the route (RateLimitPerRoute.rate_limits), one
// descriptor per entry of `descriptors`, each entry an `envoy.rate_limit_descriptors.expr` CEL descriptor entry.
//
// Descriptors that count LLM tokens (`unit: Tokens`) or read `llm` go to a second instance placed after the Sluice LLM
// ext_proc, on routes to AI backends only: there the request model is known (its entries may read
// `llm.requestModel`), a 429 is translated into the client's format by that ext_proc, and the token counts it writes
// to dynamic metadata when the response is complete are there. A `Tokens` descriptor is sent twice: on the request
// with 0 hits (refused once the budget is spent; RLS semantics of envoyproxy/ratelimit) and, when the stream is done,
// with the request's cost (`apply_on_stream_done`, hits from dynamic metadata: total tokens, or the `cost` CEL the
// ext_proc evaluated). A Realtime session's responses never pass that ext_proc: Sluice's Realtime relay sends its
// tokens to the same service itself, per response (llm/realtime-tokens.ts); Envoy still checks its upgrade.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { Traffic } from "../../../api/policy.js";
import type { Static } from "../../../api/schema-kit.js";
import { compileExpression } from "../../../cel/index.js";
import type { Cluster } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ApiVersion } from "../../../gen/envoy/config/core/v3/config_source_pb.js";
import {
  type RateLimit_Action,
  RateLimit_Action_MetaData_Source,
  RateLimit_ActionSchema,
  type RateLimitSchema as RouteRateLimitSchema,
} from "../../../gen/envoy/config/route/v3/route_components_pb.js";
import {
  RateLimitPerRouteSchema,
  RateLimitSchema,
} from "../../../gen/envoy/extensions/filters/http/ratelimit/v3/rate_limit_pb.js";
import { DescriptorSchema } from "../../../gen/envoy/extensions/rate_limit_descriptors/expr/v3/expr_pb.js";
import { durationFromMs } from "../../duration.js";
import { tokenCostFormat } from "../../llm/table.js";
import {
  CONTEXT_NAMESPACE,
  costNeedsSluice,
  entryNeedsSluice,
  rateLimitCostKey,
  rateLimitEntryKey,
} from "./context.js";
import { readsLlm, toEnvoyCel } from "./envoy-cel.js";
import { grpcService, instanceName, type Phase, phaseFields, phaseOrder, serviceCluster } from "./policy-fields.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

type RateLimit = NonNullable<Static<typeof Traffic>["rateLimit"]>;
type Descriptor = NonNullable<RateLimit["global"]>["descriptors"][number];
type RouteRateLimit = MessageInitShape<typeof RouteRateLimitSchema>;

const FILTER = "envoy.filters.http.ratelimit";

export const globalRateLimitBuilder: HttpFilterBuilder = {
  id: "ratelimit",
  schemas: [RateLimitSchema, RateLimitPerRouteSchema, DescriptorSchema],
  forRoute(route, ctx) {
    const filters: FilterInstance[] = [];
    const clusters: Cluster[] = [];
    const llmRoute = ctx.llmEntry?.(route.name) !== undefined;
    for (const f of phaseFields<RateLimit>(route, "rateLimit")) {
      const g = f.value.global;
      if (g === undefined) continue;
      const svc = serviceCluster(route, `${f.path}.global.backendRef`, f.from, ctx, true);
      if (svc.extra !== undefined) clusters.push(svc.extra);
      const plain: RouteRateLimit[] = [];
      const llm: RouteRateLimit[] = [];
      g.descriptors.forEach((d, i) => {
        const at = `rateLimit.global.descriptors[${i}]`;
        const tokens = (d.unit ?? "Requests") === "Tokens";
        const afterLlm = runsAfterLlmExtProc(d);
        if (afterLlm && !llmRoute) {
          ctx.note(
            f.from,
            tokens ? `${at}.unit` : at,
            "counts LLM tokens or reads llm, and this route sends to no AI backend; this descriptor is not sent",
            "Ignored",
          );
          return;
        }
        const actions = descriptorActions(d, afterLlm, f.phase, i, (j, message) =>
          ctx.note(f.from, `${at}.entries[${j}].expression`, message),
        );
        if (actions === undefined) return;
        if (tokens) {
          llm.push(
            { actions, hitsAddend: { number: BigInt(0) } },
            { actions, applyOnStreamDone: true, hitsAddend: { format: tokenCostFormat(d.cost) } },
          );
          return;
        }
        let hitsAddend: RouteRateLimit["hitsAddend"];
        if (d.cost !== undefined) {
          const n = /^\s*(\d+)\s*$/.exec(d.cost)?.[1];
          if (n !== undefined) hitsAddend = { number: BigInt(n) };
          else if (costNeedsSluice(d.cost)) {
            // Evaluated per request by Sluice (context.ts): a non-negative integer, 1 when it fails.
            hitsAddend = { format: `%DYNAMIC_METADATA(${CONTEXT_NAMESPACE}:${rateLimitCostKey(f.phase, i)})%` };
          } else {
            const c = compileExpression(d.cost);
            ctx.note(
              f.from,
              `${at}.cost`,
              "errors" in c
                ? `does not compile (${c.errors.map((e) => e.message).join("; ")}); each request costs 1`
                : "a Requests cost cannot read llm (known only after the rate limit is checked); each request costs 1",
              "Ignored",
            );
          }
        }
        (afterLlm ? llm : plain).push({ actions, ...(hitsAddend !== undefined ? { hitsAddend } : {}) });
      });
      const config = create(RateLimitSchema, {
        domain: g.domain,
        failureModeDeny: (g.failureMode ?? "FailClosed") === "FailClosed",
        timeout: durationFromMs(2000),
        rateLimitService: {
          grpcService: grpcService(svc.cluster, g.backendRef.name),
          transportApiVersion: ApiVersion.V3,
        },
        // The 429 the spec names; an RLS error under FailClosed is a 500 from Envoy.
      });
      const instance = (rateLimits: RouteRateLimit[], afterLlm: boolean): FilterInstance => ({
        name: instanceName(FILTER, {
          domain: g.domain,
          failureMode: g.failureMode,
          cluster: svc.cluster,
          ...(afterLlm ? { llm: true } : {}),
        }),
        order: afterLlm ? FilterOrder.llmRateLimit : phaseOrder(FilterOrder.globalRateLimit, f.phase),
        config: anyPack(RateLimitSchema, config),
        perRoute: anyPack(RateLimitPerRouteSchema, create(RateLimitPerRouteSchema, { rateLimits, domain: g.domain })),
      });
      if (plain.length > 0) filters.push(instance(plain, false));
      if (llm.length > 0) filters.push(instance(llm, true));
    }
    return filters.length === 0 ? undefined : { filters, clusters };
  },
};

/** Whether a descriptor goes to the rate limit filter placed after the Sluice LLM ext_proc: it counts tokens or reads `llm`. */
export function runsAfterLlmExtProc(d: Descriptor): boolean {
  return (d.unit ?? "Requests") === "Tokens" || d.entries.some((e) => readsLlm(e.expression));
}

/** The expr descriptor actions of a descriptor's entries; undefined (and noted) when an entry cannot be evaluated. */
function descriptorActions(
  d: Descriptor,
  afterLlm: boolean,
  phase: Phase,
  i: number,
  note: (entry: number, message: string) => void,
): RateLimit_Action[] | undefined {
  const actions: RateLimit_Action[] = [];
  for (const [j, e] of d.entries.entries()) {
    if (entryNeedsSluice(e.expression)) {
      // Sluice evaluates it before the rate limit filters run (context.ts); absent when it fails, and then, as with
      // an Envoy expression that fails, the descriptor is not sent.
      actions.push(
        create(RateLimit_ActionSchema, {
          actionSpecifier: {
            case: "metadata",
            value: {
              descriptorKey: e.name,
              metadataKey: {
                key: CONTEXT_NAMESPACE,
                path: [{ segment: { case: "key", value: rateLimitEntryKey(phase, i, j) } }],
              },
              source: RateLimit_Action_MetaData_Source.DYNAMIC,
            },
          },
        }),
      );
      continue;
    }
    const text = toEnvoyCel(e.expression, { llm: afterLlm });
    if (text === undefined) {
      const c = compileExpression(e.expression);
      note(
        j,
        "errors" in c
          ? `does not compile (${c.errors.map((x) => x.message).join("; ")}); this descriptor is not sent`
          : "reads llm and a variable known only before the LLM ext_proc runs (only llm.requestModel and llm.streaming are known when the limit is checked); this descriptor is not sent",
      );
      return undefined;
    }
    actions.push(
      create(RateLimit_ActionSchema, {
        actionSpecifier: {
          case: "extension",
          value: {
            name: "envoy.rate_limit_descriptors.expr",
            typedConfig: anyPack(
              DescriptorSchema,
              create(DescriptorSchema, { descriptorKey: e.name, exprSpecifier: { case: "text", value: text } }),
            ),
          },
        },
      }),
    );
  }
  return actions;
}
