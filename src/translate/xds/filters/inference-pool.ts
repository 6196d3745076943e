// An InferencePool (Gateway API Inference Extension), as an HTTPRoute's backendRef or a custom LLM provider's
// backendRef: on routes to it, Envoy's ext_proc calls the pool's endpoint picker (EPP) with the request, as the
// extension's endpoint picking protocol describes, and the picker answers with the model server to use in the dynamic
// metadata `envoy.lb`/`x-gateway-destination-endpoint`, which the pool's or the AI backend's ORIGINAL_DST cluster
// connects to (llm.ts pickedEndpointTargets).
//
// One filter instance per picker, after Sluice's LLM ext_proc: on a route served in one stage the picker sees the body
// the model server will get. Bodies are FULL_DUPLEX_STREAMED both ways (the only mode current pickers accept; trailers
// are then sent too), and the picker may change the processing mode.

import { create, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { type Cluster, Cluster_CommonLbConfigSchema } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { HealthCheckSchema } from "../../../gen/envoy/config/core/v3/health_check_pb.js";
import {
  ExternalProcessorSchema,
  ExtProcPerRouteSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { durationFromMs } from "../../duration.js";
import type { InferencePoolIR } from "../../ir.js";
import { buildCluster } from "../cluster.js";
import { PICKED_ENDPOINT_METADATA } from "../llm.js";
import { extProcOnRoute } from "./ext-proc-route.js";
import { grpcService, instanceName } from "./policy-fields.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

/** The picker filters' name; each instance is `<FILTER>/<hash>`. */
export const ENDPOINT_PICKER_FILTER = "sluice.endpoint_picker";
const FILTER = ENDPOINT_PICKER_FILTER;
/** A picker may hold a request while it queues it (flow control); each message waits at most this long. */
const MESSAGE_TIMEOUT_MS = 10_000;

function pickerFilter(pool: InferencePoolIR): FilterInstance {
  const config = create(ExternalProcessorSchema, {
    grpcService: grpcService(pool.picker.cluster, pool.picker.service.split("/")[1] ?? "endpoint-picker"),
    failureModeAllow: pool.failOpen,
    processingMode: {
      requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
      requestBodyMode: ProcessingMode_BodySendMode.FULL_DUPLEX_STREAMED,
      requestTrailerMode: ProcessingMode_HeaderSendMode.SEND,
      responseHeaderMode: ProcessingMode_HeaderSendMode.SEND,
      responseBodyMode: ProcessingMode_BodySendMode.FULL_DUPLEX_STREAMED,
      responseTrailerMode: ProcessingMode_HeaderSendMode.SEND,
    },
    allowModeOverride: true,
    messageTimeout: durationFromMs(MESSAGE_TIMEOUT_MS),
    // The picked endpoint; nothing else the picker sends is written to the request's metadata.
    metadataOptions: { receivingNamespaces: { untyped: [PICKED_ENDPOINT_METADATA.namespace] } },
  });
  return {
    name: instanceName(FILTER, toBinary(ExternalProcessorSchema, config)),
    order: FilterOrder.endpointPicker,
    config: anyPack(ExternalProcessorSchema, config),
    perRoute: extProcOnRoute(),
  };
}

/** Between TCP checks of each picker endpoint, with FailOpen; also each check's timeout. */
const PICKER_CHECK_MS = 1000;

/**
 * FailOpen: the picker's endpoints checked by TCP connects, with no panic mode, so an endpoint that refuses is out
 * within a check and a picker with none left fails at once, before the request body reaches its filter: Envoy
 * honours failure_mode_allow in FULL_DUPLEX_STREAMED only until then (docs/llm.md), so otherwise a refusing picker
 * would fail the request as FailClose does.
 */
function withPickerHealthCheck(cluster: Cluster): Cluster {
  cluster.healthChecks = [
    create(HealthCheckSchema, {
      timeout: durationFromMs(PICKER_CHECK_MS),
      interval: durationFromMs(PICKER_CHECK_MS),
      unhealthyThreshold: 1,
      healthyThreshold: 1,
      healthChecker: { case: "tcpHealthCheck", value: {} },
    }),
  ];
  cluster.commonLbConfig = create(Cluster_CommonLbConfigSchema, { healthyPanicThreshold: { value: 0 } });
  return cluster;
}

export const endpointPickerBuilder: HttpFilterBuilder = {
  id: "endpoint-picker",
  schemas: [ExternalProcessorSchema, ExtProcPerRouteSchema],
  forRoute(route, ctx) {
    if (route.action.kind !== "forward") return undefined;
    const filters: FilterInstance[] = [];
    const clusters: Cluster[] = [];
    for (const b of route.action.backends) {
      const c = ctx.cluster?.(b.cluster);
      const pool = c?.kind === "llm" ? c.groups.flat()[0]?.pool : c?.kind === "pool" ? c.pool : undefined;
      if (pool === undefined) continue;
      filters.push(pickerFilter(pool));
      const cluster = buildCluster({
        kind: "static",
        name: pool.picker.cluster,
        endpoints: pool.picker.endpoints,
        http2: true,
      });
      clusters.push(pool.failOpen ? withPickerHealthCheck(cluster) : cluster);
    }
    return filters.length === 0 ? undefined : { filters, clusters };
  },
};
