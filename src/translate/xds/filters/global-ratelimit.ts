// traffic.rateLimit.global → envoy.filters.http.ratelimit calling the user's rate limit service (Envoy's RLS
// protocol) over gRPC. The service, domain and failure mode are listener-level in Envoy, so there is one instance per
// distinct (service, domain, failure mode); the descriptors go on the route (RateLimitPerRoute.rate_limits), one
// descriptor per entry of `descriptors`, each entry an `envoy.rate_limit_descriptors.expr` CEL descriptor entry.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { Traffic } from "../../../api/policy.js";
import type { Static } from "../../../api/schema-kit.js";
import type { Cluster } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ApiVersion } from "../../../gen/envoy/config/core/v3/config_source_pb.js";
import {
  type RateLimit_Action,
  RateLimit_ActionSchema,
  type RateLimitSchema as RouteRateLimitSchema,
} from "../../../gen/envoy/config/route/v3/route_components_pb.js";
import {
  RateLimitPerRouteSchema,
  RateLimitSchema,
} from "../../../gen/envoy/extensions/filters/http/ratelimit/v3/rate_limit_pb.js";
import { DescriptorSchema } from "../../../gen/envoy/extensions/rate_limit_descriptors/expr/v3/expr_pb.js";
import { durationFromMs } from "../../duration.js";
import { toEnvoyCel } from "./envoy-cel.js";
import { grpcService, instanceName, phaseFields, phaseOrder, serviceCluster } from "./policy-fields.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

type RateLimit = NonNullable<Static<typeof Traffic>["rateLimit"]>;

const FILTER = "envoy.filters.http.ratelimit";

export const globalRateLimitBuilder: HttpFilterBuilder = {
  id: "ratelimit",
  schemas: [RateLimitSchema, RateLimitPerRouteSchema, DescriptorSchema],
  forRoute(route, ctx) {
    const filters: FilterInstance[] = [];
    const clusters: Cluster[] = [];
    for (const f of phaseFields<RateLimit>(route, "rateLimit")) {
      const g = f.value.global;
      if (g === undefined) continue;
      const svc = serviceCluster(route, `${f.path}.global.backendRef`, f.from, ctx, true);
      if (svc.extra !== undefined) clusters.push(svc.extra);
      const rateLimits: MessageInitShape<typeof RouteRateLimitSchema>[] = [];
      g.descriptors.forEach((d, i) => {
        const at = `rateLimit.global.descriptors[${i}]`;
        if ((d.unit ?? "Requests") === "Tokens") {
          ctx.note(
            f.from,
            `${at}.unit`,
            "token costs are counted with the LLM backends; this descriptor is not sent yet",
          );
          return;
        }
        const actions: RateLimit_Action[] = [];
        for (const [j, e] of d.entries.entries()) {
          const text = toEnvoyCel(e.expression);
          if (text === undefined) {
            ctx.note(
              f.from,
              `${at}.entries[${j}].expression`,
              "only request.* and jwt.<claim> expressions are evaluated by Envoy; this descriptor is not sent yet",
            );
            return;
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
        let hitsAddend: MessageInitShape<typeof RouteRateLimitSchema>["hitsAddend"];
        if (d.cost !== undefined) {
          const n = /^\s*(\d+)\s*$/.exec(d.cost)?.[1];
          if (n !== undefined) hitsAddend = { number: BigInt(n) };
          else {
            ctx.note(f.from, `${at}.cost`, "only a constant integer cost is supported yet; each request costs 1");
          }
        }
        rateLimits.push({ actions, ...(hitsAddend !== undefined ? { hitsAddend } : {}) });
      });
      if (rateLimits.length === 0) continue;
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
      filters.push({
        name: instanceName(FILTER, { domain: g.domain, failureMode: g.failureMode, cluster: svc.cluster }),
        order: phaseOrder(FilterOrder.globalRateLimit, f.phase),
        config: anyPack(RateLimitSchema, config),
        perRoute: anyPack(RateLimitPerRouteSchema, create(RateLimitPerRouteSchema, { rateLimits, domain: g.domain })),
      });
    }
    return filters.length === 0 ? undefined : { filters, clusters };
  },
};
