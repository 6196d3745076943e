// Filters whose whole configuration can live on the route: one instance each, enabled per route with the route's
// config. CORS (first, so preflights are answered before authentication), CSRF, fault (delay) and buffer.
// When both phases set one of these fields, the PostRouting value is the route's config (one config per route).

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { CORS, Traffic } from "../../../api/policy.js";
import type { Static } from "../../../api/schema-kit.js";
import { compileExpression } from "../../../cel/index.js";
import { RuntimeFractionalPercentSchema } from "../../../gen/envoy/config/core/v3/base_pb.js";
import type { FaultDelaySchema } from "../../../gen/envoy/extensions/filters/common/fault/v3/fault_pb.js";
import { BufferPerRouteSchema, BufferSchema } from "../../../gen/envoy/extensions/filters/http/buffer/v3/buffer_pb.js";
import { CorsPolicySchema, CorsSchema } from "../../../gen/envoy/extensions/filters/http/cors/v3/cors_pb.js";
import { CsrfPolicySchema } from "../../../gen/envoy/extensions/filters/http/csrf/v3/csrf_pb.js";
import { HTTPFaultSchema } from "../../../gen/envoy/extensions/filters/http/fault/v3/fault_pb.js";
import { FileSystemBufferFilterConfigSchema } from "../../../gen/envoy/extensions/filters/http/file_system_buffer/v3/file_system_buffer_pb.js";
import { FractionalPercent_DenominatorType } from "../../../gen/envoy/type/v3/percent_pb.js";
import { parseByteSize } from "../../bytes.js";
import { durationFromMs, parseDurationMs } from "../../duration.js";
import type { RouteIR } from "../../ir.js";
import { failOpenBuffer } from "../buffer-fail-open.js";
import { type PhaseField, phaseFields } from "./policy-fields.js";
import { FilterOrder, type HttpFilterBuilder, type RouteContribution } from "./types.js";

type TrafficT = Static<typeof Traffic>;

function last<T>(route: RouteIR, name: string): PhaseField<T> | undefined {
  return phaseFields<T>(route, name).at(-1);
}

const ALWAYS = create(RuntimeFractionalPercentSchema, {
  defaultValue: { numerator: 100, denominator: FractionalPercent_DenominatorType.HUNDRED },
});

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Gateway API origins: `*` alone is any origin; a `*` inside stands for one or more host labels. */
function originMatcher(origin: string) {
  if (origin === "*") return { matchPattern: { case: "safeRegex" as const, value: { regex: ".*" } } };
  if (!origin.includes("*")) return { matchPattern: { case: "exact" as const, value: origin } };
  const regex = origin.split("*").map(escapeRegex).join("[^/]+");
  return { matchPattern: { case: "safeRegex" as const, value: { regex: `^${regex}$` } } };
}

const CORS_FILTER = "envoy.filters.http.cors";
export const corsBuilder: HttpFilterBuilder = {
  id: "cors",
  schemas: [CorsSchema, CorsPolicySchema],
  forRoute(route) {
    const f = last<Static<typeof CORS>>(route, "cors");
    if (f === undefined) return undefined;
    const c = f.value;
    const policy = create(CorsPolicySchema, {
      allowOriginStringMatch: (c.allowOrigins ?? []).map(originMatcher),
      allowMethods: (c.allowMethods ?? []).join(","),
      allowHeaders: (c.allowHeaders ?? []).join(","),
      exposeHeaders: (c.exposeHeaders ?? []).join(","),
      maxAge: String(c.maxAge ?? 5),
      ...(c.allowCredentials !== undefined ? { allowCredentials: c.allowCredentials } : {}),
    });
    return {
      filters: [
        {
          name: CORS_FILTER,
          order: FilterOrder.cors,
          config: anyPack(CorsSchema, create(CorsSchema)),
          perRoute: anyPack(CorsPolicySchema, policy),
        },
      ],
    };
  },
};

const CSRF_FILTER = "envoy.filters.http.csrf";
export const csrfBuilder: HttpFilterBuilder = {
  id: "csrf",
  schemas: [CsrfPolicySchema],
  forRoute(route) {
    const f = last<NonNullable<TrafficT["csrf"]>>(route, "csrf");
    if (f === undefined) return undefined;
    // Envoy compares the Origin (or Referer) with the Host, and accepts these origins too; unsafe methods only.
    const policy = create(CsrfPolicySchema, {
      filterEnabled: ALWAYS,
      additionalOrigins: (f.value.additionalOrigins ?? []).map((o) => ({
        matchPattern: { case: "exact" as const, value: o.replace(/^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//, "") },
      })),
    });
    return {
      filters: [
        {
          name: CSRF_FILTER,
          order: FilterOrder.csrf,
          config: anyPack(CsrfPolicySchema, create(CsrfPolicySchema, { filterEnabled: ALWAYS })),
          perRoute: anyPack(CsrfPolicySchema, policy),
        },
      ],
    };
  },
};

const FAULT_FILTER = "envoy.filters.http.fault";

/** The fault filter delaying every request of the route: by a fixed duration, or by the request's delay header. */
function faultDelay(
  delay: NonNullable<MessageInitShape<typeof FaultDelaySchema>["faultDelaySecifier"]>,
): RouteContribution {
  const perRoute = create(HTTPFaultSchema, {
    delay: {
      faultDelaySecifier: delay,
      percentage: { numerator: 100, denominator: FractionalPercent_DenominatorType.HUNDRED },
    },
  });
  return {
    filters: [
      {
        name: FAULT_FILTER,
        order: FilterOrder.fault,
        config: anyPack(HTTPFaultSchema, create(HTTPFaultSchema)),
        perRoute: anyPack(HTTPFaultSchema, perRoute),
      },
    ],
  };
}
export const faultBuilder: HttpFilterBuilder = {
  id: "fault",
  schemas: [HTTPFaultSchema],
  forRoute(route, ctx) {
    const f = last<NonNullable<TrafficT["delay"]>>(route, "delay");
    if (f === undefined) return undefined;
    const ms = parseDurationMs(f.value.duration.trim());
    if (ms === undefined) {
      // CEL: Sluice's transformation ext_proc evaluates it per request and sets Envoy's fault delay header, which
      // this route's fault filter reads (and no other route's does).
      const compiled = compileExpression(f.value.duration);
      if ("errors" in compiled) {
        ctx.note(
          f.from,
          "delay.duration",
          `${compiled.errors.map((e) => e.message).join("; ")}; not applied`,
          "Ignored",
        );
        return undefined;
      }
      return faultDelay({ case: "headerDelay", value: {} });
    }
    // A non-positive duration injects nothing (durations cannot be negative here, so only zero).
    if (ms <= 0) return undefined;
    return faultDelay({ case: "fixedDelay", value: durationFromMs(ms) });
  },
};

const BUFFER_FILTER = "envoy.filters.http.buffer";
const RESPONSE_BUFFER_FILTER = "envoy.filters.http.file_system_buffer";
const DEFAULT_MAX_BYTES = 2 * 1024 * 1024;

/** Route metadata (namespace `sluice`) marking a route whose whole response is buffered; see listener.ts. */
export const BUFFER_RESPONSE_METADATA_KEY = "bufferResponse";
export { RESPONSE_BUFFER_FILTER };

/**
 * `buffer`. Request only: Envoy's buffer filter (413 above maxBytes). With `response`: Envoy's file system buffer
 * filter, kept in memory (no storage), which buffers the request (413 above its maxBytes) and the whole response;
 * a response above its maxBytes becomes a local 500 that the listener's local-reply mapper turns into the spec's 502
 * (routes are marked through route metadata). The two filters are never enabled on one route, as Envoy advises.
 */
export const bufferBuilder: HttpFilterBuilder = {
  id: "buffer",
  schemas: [BufferSchema, BufferPerRouteSchema, FileSystemBufferFilterConfigSchema],
  forRoute(route) {
    const f = last<NonNullable<TrafficT["buffer"]>>(route, "buffer");
    if (f === undefined) return undefined;
    const { request: req, response: res } = f.value;
    const limit = (maxBytes: string | number | undefined) =>
      Math.min(parseByteSize(maxBytes ?? "2Mi") ?? DEFAULT_MAX_BYTES, 0xffffffff);
    // FailOpen sides: held by Sluice up to maxBytes, larger bodies pass (buffer-fail-open.ts).
    const openReq = req?.failureMode === "FailOpen";
    const openRes = res?.failureMode === "FailOpen";
    const open =
      openReq || openRes
        ? [
            failOpenBuffer({
              ...(openReq ? { request: limit(req?.maxBytes) } : {}),
              ...(openRes ? { response: limit(res?.maxBytes) } : {}),
            }),
          ]
        : [];
    const closedReq = openReq ? undefined : req;
    const closedRes = openRes ? undefined : res;
    if (closedRes !== undefined) {
      const fully = (maxBytes: string | number | undefined) => ({
        behavior: { behavior: { case: "fullyBuffer" as const, value: {} } },
        memoryBufferBytesLimit: BigInt(limit(maxBytes)),
        storageBufferBytesLimit: 0n,
      });
      const perRoute = create(FileSystemBufferFilterConfigSchema, {
        ...(closedReq !== undefined ? { request: fully(closedReq.maxBytes) } : {}),
        response: fully(closedRes.maxBytes),
      });
      return {
        filters: [
          {
            name: RESPONSE_BUFFER_FILTER,
            order: FilterOrder.buffer,
            // The thread pool is only used for storage, which is never configured here.
            config: anyPack(
              FileSystemBufferFilterConfigSchema,
              create(FileSystemBufferFilterConfigSchema, {
                managerConfig: { managerType: { case: "threadPool", value: { threadCount: 1 } } },
              }),
            ),
            perRoute: anyPack(FileSystemBufferFilterConfigSchema, perRoute),
          },
          ...open,
        ],
      };
    }
    if (closedReq === undefined) return open.length > 0 ? { filters: open } : undefined;
    // Envoy's buffer filter answers 413 when the body exceeds max_request_bytes.
    const buffer = { maxRequestBytes: limit(closedReq.maxBytes) };
    return {
      filters: [
        {
          name: BUFFER_FILTER,
          order: FilterOrder.buffer,
          config: anyPack(BufferSchema, create(BufferSchema, { maxRequestBytes: DEFAULT_MAX_BYTES })),
          perRoute: anyPack(
            BufferPerRouteSchema,
            create(BufferPerRouteSchema, { override: { case: "buffer", value: buffer } }),
          ),
        },
        ...open,
      ],
    };
  },
};
