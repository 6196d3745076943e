// Filters whose whole configuration can live on the route: one instance each, enabled per route with the route's
// config. CORS (first, so preflights are answered before authentication), CSRF, fault (delay) and buffer.
// When both phases set one of these fields, the PostRouting value is the route's config (one config per route).

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { CORS, Traffic } from "../../../api/policy.js";
import type { Static } from "../../../api/schema-kit.js";
import { RuntimeFractionalPercentSchema } from "../../../gen/envoy/config/core/v3/base_pb.js";
import { BufferPerRouteSchema, BufferSchema } from "../../../gen/envoy/extensions/filters/http/buffer/v3/buffer_pb.js";
import { CorsPolicySchema, CorsSchema } from "../../../gen/envoy/extensions/filters/http/cors/v3/cors_pb.js";
import { CsrfPolicySchema } from "../../../gen/envoy/extensions/filters/http/csrf/v3/csrf_pb.js";
import { HTTPFaultSchema } from "../../../gen/envoy/extensions/filters/http/fault/v3/fault_pb.js";
import { FractionalPercent_DenominatorType } from "../../../gen/envoy/type/v3/percent_pb.js";
import { parseByteSize } from "../../bytes.js";
import { durationFromMs, parseDurationMs } from "../../duration.js";
import type { RouteIR } from "../../ir.js";
import { type PhaseField, phaseFields } from "./policy-fields.js";
import { FilterOrder, type HttpFilterBuilder } from "./types.js";

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
export const faultBuilder: HttpFilterBuilder = {
  id: "fault",
  schemas: [HTTPFaultSchema],
  forRoute(route, ctx) {
    const f = last<NonNullable<TrafficT["delay"]>>(route, "delay");
    if (f === undefined) return undefined;
    const ms = parseDurationMs(f.value.duration.trim());
    if (ms === undefined) {
      ctx.note(
        f.from,
        "delay.duration",
        "a CEL duration is evaluated per request; that needs the Sluice ext_proc service and is not supported yet",
      );
      return undefined;
    }
    // A non-positive duration injects nothing (durations cannot be negative here, so only zero).
    if (ms <= 0) return undefined;
    const fault = create(HTTPFaultSchema, {
      delay: {
        faultDelaySecifier: { case: "fixedDelay", value: durationFromMs(ms) },
        percentage: { numerator: 100, denominator: FractionalPercent_DenominatorType.HUNDRED },
      },
    });
    return {
      filters: [
        {
          name: FAULT_FILTER,
          order: FilterOrder.fault,
          config: anyPack(HTTPFaultSchema, create(HTTPFaultSchema)),
          perRoute: anyPack(HTTPFaultSchema, fault),
        },
      ],
    };
  },
};

const BUFFER_FILTER = "envoy.filters.http.buffer";
const DEFAULT_MAX_BYTES = 2 * 1024 * 1024;
export const bufferBuilder: HttpFilterBuilder = {
  id: "buffer",
  schemas: [BufferSchema, BufferPerRouteSchema],
  forRoute(route, ctx) {
    const f = last<NonNullable<TrafficT["buffer"]>>(route, "buffer");
    if (f === undefined) return undefined;
    if (f.value.response !== undefined) {
      ctx.note(
        f.from,
        "buffer.response",
        "buffering the whole response (502 above maxBytes) has no native Envoy filter here and is not supported yet",
      );
    }
    const req = f.value.request;
    if (req === undefined) return undefined;
    if (req.failureMode === "FailOpen") {
      ctx.note(f.from, "buffer.request.failureMode", "FailOpen is not supported: a larger body is rejected with 413");
    }
    const max = parseByteSize(req.maxBytes ?? "2Mi") ?? DEFAULT_MAX_BYTES;
    // Envoy's buffer filter answers 413 when the body exceeds max_request_bytes.
    const buffer = { maxRequestBytes: Math.min(max, 0xffffffff) };
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
      ],
    };
  },
};
