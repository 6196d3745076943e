// traffic.extAuth → envoy.filters.http.ext_authz calling the user's authorization service, gRPC
// (envoy.service.auth.v3) or HTTP. The service and its options are listener-level in Envoy, so there is one instance
// per distinct configuration; per-request context (contextExtensions) goes on the route. Fields that need CEL per
// request are reported as not yet supported; they are for the Sluice ext_authz service.

import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { ExtAuth } from "../../../api/auth.js";
import type { Static } from "../../../api/schema-kit.js";
import type { Cluster } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ApiVersion } from "../../../gen/envoy/config/core/v3/config_source_pb.js";
import {
  ExtAuthzPerRouteSchema,
  ExtAuthzSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_authz/v3/ext_authz_pb.js";
import type { ListStringMatcherSchema } from "../../../gen/envoy/type/matcher/v3/string_pb.js";
import { parseByteSize } from "../../bytes.js";
import { durationFromMs } from "../../duration.js";
import {
  celStringLiteral,
  grpcService,
  instanceName,
  phaseFields,
  phaseOrder,
  serviceCluster,
} from "./policy-fields.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

type ExtAuthT = Static<typeof ExtAuth>;

const FILTER = "envoy.filters.http.ext_authz";
const CHECK_TIMEOUT_MS = 10_000;

function headerList(names: readonly string[]): MessageInitShape<typeof ListStringMatcherSchema> {
  return {
    patterns: names.map((n) => ({
      matchPattern: { case: "exact" as const, value: n.toLowerCase() },
      ignoreCase: true,
    })),
  };
}

export const extAuthzBuilder: HttpFilterBuilder = {
  id: "ext_authz",
  schemas: [ExtAuthzSchema, ExtAuthzPerRouteSchema],
  forRoute(route, ctx) {
    const filters: FilterInstance[] = [];
    const clusters: Cluster[] = [];
    for (const f of phaseFields<ExtAuthT>(route, "extAuth")) {
      const a = f.value;
      const svc = serviceCluster(route, `${f.path}.backendRef`, f.from, ctx, a.http === undefined);
      if (svc.extra !== undefined) clusters.push(svc.extra);
      const note = (field: string, message: string) => ctx.note(f.from, `extAuth.${field}`, message);
      if (a.cache !== undefined) {
        note(
          "cache",
          "the decision cache is kept by the Sluice ext_authz service, which does not front user services yet; " +
            "every request is checked by the service",
        );
      }
      const config: MessageInitShape<typeof ExtAuthzSchema> = {
        transportApiVersion: ApiVersion.V3,
        failureModeAllow: a.failureMode === "FailOpen",
        ...(a.forwardBody !== undefined
          ? {
              // Without partial messages Envoy rejects larger bodies with 413, as the spec says.
              withRequestBody: {
                maxRequestBytes: Math.min(parseByteSize(a.forwardBody.maxSize) ?? 0, 0xffffffff),
                allowPartialMessage: false,
              },
            }
          : {}),
      };
      if (a.http !== undefined) {
        const h = a.http;
        const path = h.path !== undefined ? celStringLiteral(h.path) : undefined;
        if (h.path !== undefined && path === undefined) {
          note("http.path", "only a constant path (a CEL string literal) is supported yet; the original path is sent");
        }
        for (const k of ["redirect", "body", "responseMetadata"] as const) {
          if (h[k] !== undefined) note(`http.${k}`, "needs CEL per request (Sluice ext_authz); not supported yet");
        }
        const headersToAdd: { key: string; value: string }[] = [];
        for (const [name, expr] of Object.entries(h.addRequestHeaders ?? {})) {
          const v = celStringLiteral(expr);
          if (v === undefined) note(`http.addRequestHeaders.${name}`, "only constant values (CEL string literals) yet");
          else headersToAdd.push({ key: name, value: v });
        }
        config.services = {
          case: "httpService",
          value: {
            serverUri: {
              uri: `http://${a.backendRef.name}`,
              httpUpstreamType: { case: "cluster", value: svc.cluster },
              timeout: durationFromMs(CHECK_TIMEOUT_MS),
            },
            ...(path !== undefined ? { pathOverride: path } : {}),
            authorizationRequest: { headersToAdd },
            authorizationResponse: {
              ...(h.allowedResponseHeaders !== undefined
                ? { allowedUpstreamHeaders: headerList(h.allowedResponseHeaders) }
                : {}),
            },
          },
        };
        // The spec's default sends only Authorization (Envoy adds the pseudo-headers it always sends).
        config.allowedHeaders = headerList(h.allowedRequestHeaders ?? ["authorization"]);
      } else {
        if (a.grpc?.requestMetadata !== undefined) {
          note("grpc.requestMetadata", "needs CEL per request (Sluice ext_authz); not supported yet");
        }
        config.services = { case: "grpcService", value: grpcService(svc.cluster, a.backendRef.name, CHECK_TIMEOUT_MS) };
      }
      const built = create(ExtAuthzSchema, config);
      filters.push({
        name: instanceName(FILTER, toBinary(ExtAuthzSchema, built)),
        order: phaseOrder(FilterOrder.userExtAuthz, f.phase),
        config: anyPack(ExtAuthzSchema, built),
        perRoute: anyPack(
          ExtAuthzPerRouteSchema,
          create(ExtAuthzPerRouteSchema, {
            override: { case: "checkSettings", value: { contextExtensions: { ...(a.grpc?.contextExtensions ?? {}) } } },
          }),
        ),
      });
    }
    return filters.length === 0 ? undefined : { filters, clusters };
  },
};
