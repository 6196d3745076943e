// Enabling an ext_proc filter on one route (every Sluice and user ext_proc filter is listener-level and disabled).

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { type Any, anyPack } from "@bufbuild/protobuf/wkt";
import {
  type ExtProcOverridesSchema,
  ExtProcPerRouteSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";

/**
 * The per-route config enabling an ext_proc filter with these overrides. Envoy refuses an enabling FilterConfig
 * without a config; empty overrides keep the listener-level one.
 */
export function extProcOnRoute(overrides: MessageInitShape<typeof ExtProcOverridesSchema> = {}): Any {
  return anyPack(
    ExtProcPerRouteSchema,
    create(ExtProcPerRouteSchema, { override: { case: "overrides", value: overrides } }),
  );
}
