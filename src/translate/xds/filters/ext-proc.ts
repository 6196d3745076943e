// traffic.extProc → envoy.filters.http.ext_proc calling the user's external processor (envoy.service.ext_proc.v3).
// The service is listener-level in Envoy, so there is one instance per distinct configuration. Envoy's failure
// mode matches the spec's caveat: with FailOpen, a processor that fails before body data has been sent is skipped;
// once the body streams to it, the stream cannot be recovered and fails.

import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { ExtProc } from "../../../api/policy.js";
import type { Static } from "../../../api/schema-kit.js";
import { compileExpression } from "../../../cel/index.js";
import type { Cluster } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import {
  ExternalProcessorSchema,
  ExtProcPerRouteSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
  type ProcessingModeSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { HttpRequestHeaderMatchInputSchema } from "../../../gen/envoy/type/matcher/v3/http_inputs_pb.js";
import { MatcherSchema } from "../../../gen/xds/type/matcher/v3/matcher_pb.js";
import { durationFromMs } from "../../duration.js";
import type { PolicySourceIR } from "../../ir.js";
import { extProcAttributes, extProcEntryHeader, metadataContextValues } from "./context.js";
import { readsLlm } from "./envoy-cel.js";
import { extProcOnRoute } from "./ext-proc-route.js";
import {
  ExtensionWithMatcherPerRouteSchema,
  ExtensionWithMatcherSchema,
  SkipFilterSchema,
} from "./extension-matcher.js";
import { MAPPED_ATTRIBUTE_BUILDER, MappedAttributeBuilderSchema } from "./mapped-attributes.js";
import {
  grpcService,
  instanceName,
  type Phase,
  phaseFields,
  phaseOrder,
  serviceCluster,
  unconditional,
} from "./policy-fields.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

type ExtProcT = Static<typeof ExtProc>;
type Options = NonNullable<ExtProcT["processingOptions"]>;

const FILTER = "envoy.filters.http.ext_proc";
/** One entry of a conditional extProc: the ext_proc filter behind a matcher (extension-matcher.ts). */
const ENTRY_FILTER = "sluice.ext_proc_entry";
const BODY = {
  None: ProcessingMode_BodySendMode.NONE,
  Buffered: ProcessingMode_BodySendMode.BUFFERED,
  BufferedPartial: ProcessingMode_BodySendMode.BUFFERED_PARTIAL,
  FullDuplexStreamed: ProcessingMode_BodySendMode.FULL_DUPLEX_STREAMED,
} as const;
const SEND = { Send: ProcessingMode_HeaderSendMode.SEND, Skip: ProcessingMode_HeaderSendMode.SKIP } as const;

export const extProcBuilder: HttpFilterBuilder = {
  id: "ext_proc",
  schemas: [
    ExternalProcessorSchema,
    ExtProcPerRouteSchema,
    MappedAttributeBuilderSchema,
    ExtensionWithMatcherSchema,
    ExtensionWithMatcherPerRouteSchema,
    SkipFilterSchema,
    HttpRequestHeaderMatchInputSchema,
  ],
  forRoute(route, ctx) {
    const filters: FilterInstance[] = [];
    const clusters: Cluster[] = [];
    for (const f of phaseFields<ExtProcT & { conditional?: { condition?: string; policy: ExtProcT }[] }>(
      route,
      "extProc",
    )) {
      const list = f.value.conditional;
      const first = list?.[0];
      if (
        list !== undefined &&
        first !== undefined &&
        first.condition !== undefined &&
        first.condition.trim() !== "true"
      ) {
        // Entries chosen by CEL: Sluice's context filter names the chosen entry in a request header (context.ts);
        // each entry's filter is wrapped in a matcher that skips it unless the header names that entry.
        const header = extProcEntryHeader(f.phase);
        list.forEach((c, i) => {
          const at = `.conditional[${i}].policy`;
          const config = processorConfig(c.policy, at, f, i);
          const wrapped = create(ExtensionWithMatcherSchema, {
            extensionConfig: { name: FILTER, typedConfig: anyPack(ExternalProcessorSchema, config) },
            xdsMatcher: skipUnless(header, i),
          });
          filters.push({
            name: instanceName(ENTRY_FILTER, toBinary(ExtensionWithMatcherSchema, wrapped)),
            order: phaseOrder(FilterOrder.userExtProc, f.phase),
            config: anyPack(ExtensionWithMatcherSchema, wrapped),
            perRoute: anyPack(
              ExtensionWithMatcherPerRouteSchema,
              create(ExtensionWithMatcherPerRouteSchema, { xdsMatcher: skipUnless(header, i) }),
            ),
          });
        });
        continue;
      }
      const chosen = unconditional(f.value, f.from, "extProc", ctx);
      if (chosen === undefined) continue;
      const config = processorConfig(chosen.policy, chosen.path, f);
      filters.push({
        name: instanceName(FILTER, toBinary(ExternalProcessorSchema, config)),
        order: phaseOrder(FilterOrder.userExtProc, f.phase),
        config: anyPack(ExternalProcessorSchema, config),
        perRoute: extProcOnRoute(),
      });
    }
    return filters.length === 0 ? undefined : { filters, clusters };

    /** The ExternalProcessor config of one policy entry (`path`: where it is written, for the notes). */
    function processorConfig(
      p: ExtProcT,
      path: string,
      f: { readonly from: PolicySourceIR; readonly path: string; readonly phase: Phase },
      entry?: number,
    ) {
      const chosen = { path };
      // Notes name the field where it is written: inside the applied conditional entry when that is where it came from.
      const note = (field: string, message: string) => ctx.note(f.from, `extProc${chosen.path}.${field}`, message);
      const svc = serviceCluster(route, `${f.path}${chosen.path}.backendRef`, f.from, ctx, true);
      if (svc.extra !== undefined) clusters.push(svc.extra);
      const o: Options = p.processingOptions ?? {};
      const mode: MessageInitShape<typeof ProcessingModeSchema> = {
        requestHeaderMode: SEND[o.requestHeaderMode ?? "Send"],
        responseHeaderMode: SEND[o.responseHeaderMode ?? "Send"],
        requestBodyMode: BODY[o.requestBodyMode ?? "FullDuplexStreamed"],
        responseBodyMode: BODY[o.responseBodyMode ?? "FullDuplexStreamed"],
        requestTrailerMode: SEND[o.requestTrailerMode ?? "Send"],
        responseTrailerMode: SEND[o.responseTrailerMode ?? "Send"],
      };
      // Envoy requires trailers to be sent in full-duplex mode (the processor learns the end of the body from them).
      for (const dir of ["request", "response"] as const) {
        if (
          (o[`${dir}BodyMode`] ?? "FullDuplexStreamed") === "FullDuplexStreamed" &&
          o[`${dir}TrailerMode`] === "Skip"
        ) {
          note(
            `processingOptions.${dir}TrailerMode`,
            "Skip is not possible with FullDuplexStreamed; trailers are sent",
          );
          mode[`${dir}TrailerMode`] = ProcessingMode_HeaderSendMode.SEND;
        }
      }
      // Sluice evaluates the values before this filter runs (context.ts) into the namespaces named, which this
      // filter forwards to the processor (ProcessingRequest.metadata_context).
      for (const [ns, keys] of Object.entries(p.metadataContext ?? {})) {
        for (const [key, expr] of Object.entries(keys)) {
          const c = compileExpression(expr);
          if ("errors" in c) {
            ctx.note(
              f.from,
              `extProc${chosen.path}.metadataContext.${ns}.${key}`,
              `does not compile (${c.errors.map((e) => e.message).join("; ")}); left out`,
              "Ignored",
            );
          }
        }
      }
      const forwarded = [...new Set(metadataContextValues(p.metadataContext).map((v) => v.namespace))].sort();
      // Attributes under the policy's names: Envoy's own request_attributes when each is an Envoy attribute under its
      // own text, else the MappedAttributeBuilder modifier (values Sluice computes come from the context filter).
      const plan = extProcAttributes(p, f.phase, entry);
      for (const [field, message] of plan.unsent) note(field, message);
      if (ctx.llmEntry?.(route.name) === undefined) {
        const reads = [
          ...(["requestAttributes", "responseAttributes"] as const).flatMap((dir) =>
            Object.entries(p[dir] ?? {}).map(([name, expr]) => [`${dir}.${name}`, expr] as const),
          ),
          ...Object.entries(p.metadataContext ?? {}).flatMap(([ns, keys]) =>
            Object.entries(keys).map(([key, expr]) => [`metadataContext.${ns}.${key}`, expr] as const),
          ),
        ];
        for (const [field, expr] of reads) {
          if (readsLlm(expr)) {
            ctx.note(
              f.from,
              `extProc${chosen.path}.${field}`,
              "reads llm, and this route sends to no AI backend: llm is never set there, so it is never sent",
              "Ignored",
            );
          }
        }
      }
      const attributes = (dir: "request" | "response"): string[] =>
        plan.native || (dir === "response" && !plan.responseMapped) ? Object.values(plan[dir]).sort() : [];
      const mapped = plan.native
        ? undefined
        : {
            name: MAPPED_ATTRIBUTE_BUILDER,
            typedConfig: anyPack(
              MappedAttributeBuilderSchema,
              create(MappedAttributeBuilderSchema, {
                mappedRequestAttributes: plan.request,
                ...(plan.responseMapped ? { mappedResponseAttributes: plan.response } : {}),
              }),
            ),
          };
      return create(ExternalProcessorSchema, {
        grpcService: grpcService(svc.cluster, p.backendRef?.name ?? "ext-proc"),
        failureModeAllow: p.failureMode === "FailOpen",
        processingMode: mode,
        allowModeOverride: o.allowModeOverride ?? false,
        requestAttributes: attributes("request"),
        responseAttributes: attributes("response"),
        ...(mapped !== undefined ? { processingRequestModifier: mapped } : {}),
        ...(forwarded.length > 0 ? { metadataOptions: { forwardingNamespaces: { untyped: forwarded } } } : {}),
        messageTimeout: durationFromMs(5000),
      });
    }
  },
};

/** An xDS matcher skipping the wrapped filter unless request header `header` is `entry`. */
function skipUnless(header: string, entry: number) {
  return create(MatcherSchema, {
    matcherType: {
      case: "matcherList",
      value: {
        matchers: [
          {
            predicate: {
              matchType: {
                case: "notMatcher",
                value: {
                  matchType: {
                    case: "singlePredicate",
                    value: {
                      input: {
                        name: "header",
                        typedConfig: anyPack(
                          HttpRequestHeaderMatchInputSchema,
                          create(HttpRequestHeaderMatchInputSchema, { headerName: header }),
                        ),
                      },
                      matcher: {
                        case: "valueMatch",
                        value: { matchPattern: { case: "exact", value: String(entry) } },
                      },
                    },
                  },
                },
              },
            },
            onMatch: {
              onMatch: {
                case: "action",
                value: { name: "skip", typedConfig: anyPack(SkipFilterSchema, create(SkipFilterSchema)) },
              },
            },
          },
        ],
      },
    },
  });
}
