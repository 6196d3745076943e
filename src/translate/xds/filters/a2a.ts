// GwBackend `a2a` → an ext_proc filter to Sluice's hot-path gRPC server on routes to an agent-to-agent endpoint, so that
// the agent card (`/.well-known/agent-card.json`, and the older `agent.json`) reaches the client with the Gateway's
// address in place of the agent's (src/a2a/agent-card.ts). Envoy sends only each request's headers: the processor
// asks for the response (headers and buffered body) by a mode override on the card's GET alone, so JSON-RPC calls and
// SSE streams pass through unbuffered, with the route's and the backend's policies like any HTTP traffic.

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { A2A_STAGE } from "../../../a2a/agent-card.js";
import {
  ExternalProcessorSchema,
  ExtProcPerRouteSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import { extProcOnRoute } from "./ext-proc-route.js";
import { sluiceStageProcessor } from "./sluice-stage.js";
import { FilterOrder, type HttpFilterBuilder } from "./types.js";

const FILTER = "sluice.a2a";

function listenerConfig() {
  return create(ExternalProcessorSchema, {
    ...sluiceStageProcessor(A2A_STAGE),
    // The card's GET asks for its response (headers, buffered body) through a mode override.
    allowModeOverride: true,
    statPrefix: "sluice_a2a",
    // The rewritten card comes with its length.
    allowContentLengthHeader: true,
  });
}

export const a2aBuilder: HttpFilterBuilder = {
  id: "a2a",
  schemas: [ExternalProcessorSchema, ExtProcPerRouteSchema],
  forRoute(route, ctx) {
    if (route.action.kind !== "forward") return undefined;
    const a2a = route.action.backends.some((b) => {
      const c = ctx.cluster?.(b.cluster);
      // A static a2a backend's variant with Sluice's health scoring is an EDS cluster (backend-connection.ts).
      return c !== undefined && "a2a" in c && c.a2a === true;
    });
    if (!a2a) return undefined;
    return {
      filters: [
        {
          name: FILTER,
          order: FilterOrder.a2a,
          config: anyPack(ExternalProcessorSchema, listenerConfig()),
          perRoute: extProcOnRoute({}),
        },
      ],
    };
  },
};
