// GwPolicy `frontend` (a Gateway's downstream side) → the listener and its HttpConnectionManager, natively:
//   http           HCM protocol options (idle timeout, header count and size, HTTP/2 windows and keepalive, connection
//                  duration, header case) and the listener's per-connection buffer limit
//   tcp.keepalive  the listener's socket options (SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT)
//   proxyProtocol  the proxy_protocol listener filter (versions, Optional: plain connections accepted)
//   accessLog      an access log on stdout, JSON lines with default fields and `attributes.add` as Envoy CEL
//                  (%CEL(...)%; `request.path` is Envoy's url_path), `filter` as Envoy's CEL access log filter
//   tls            each HTTPS filter chain's TLS parameters (versions, TLS 1.2 suites, groups), ALPN and handshake timeout
//   tracing        the OpenTelemetry tracer; sampling, resources and `metrics` labels are frontend-telemetry.ts;
//                  `attributes.remove` and a `filter` reading the response through Sluice's span relay (src/otlp/);
//                  span attributes and a filter Envoy cannot evaluate computed by Sluice (tracing-context.ts)
//   collectors     the OTLP collectors of tracing and accessLog.otlp, with their backend policy's TLS, tcp and HTTP
//                  version: frontend-collector.ts
// `networkAuthorization` is network-authz.ts. What is not applied (TLS 1.3 suite choice, expressions Envoy cannot
// evaluate) is reported in the policy's status, never dropped silently.

import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { constValue, requestHeaderName } from "../../cel/ast.js";
import { compileExpression } from "../../cel/env.js";
import type { ContextValue } from "../../extproc/context.js";
import type { AccessLogSchema } from "../../gen/envoy/config/accesslog/v3/accesslog_pb.js";
import type { Cluster } from "../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ProxyProtocolConfig_Version } from "../../gen/envoy/config/core/v3/proxy_protocol_pb.js";
import type { ListenerSchema } from "../../gen/envoy/config/listener/v3/listener_pb.js";
import { OpenTelemetryConfigSchema } from "../../gen/envoy/config/trace/v3/opentelemetry_pb.js";
import { ExpressionFilterSchema } from "../../gen/envoy/extensions/access_loggers/filters/cel/v3/cel_pb.js";
import { OpenTelemetryAccessLogConfigSchema } from "../../gen/envoy/extensions/access_loggers/open_telemetry/v3/logs_service_pb.js";
import { StdoutAccessLogSchema } from "../../gen/envoy/extensions/access_loggers/stream/v3/stream_pb.js";
import { ProxyProtocolSchema } from "../../gen/envoy/extensions/filters/listener/proxy_protocol/v3/proxy_protocol_pb.js";
import type {
  HttpConnectionManagerSchema,
  HttpFilterSchema,
} from "../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import { CelSchema } from "../../gen/envoy/extensions/formatter/cel/v3/cel_pb.js";
import { PreserveCaseFormatterConfigSchema } from "../../gen/envoy/extensions/http/header_formatters/preserve_case/v3/preserve_case_pb.js";
import { TlsParameters_TlsProtocol } from "../../gen/envoy/extensions/transport_sockets/tls/v3/common_pb.js";
import type { CustomTagSchema } from "../../gen/envoy/type/tracing/v3/custom_tag_pb.js";
import { encodeRelaySpec, FILTER_TAG, RELAY_METADATA, type RelaySpec } from "../../otlp/spans.js";
import { parseByteSize } from "../bytes.js";
import { durationFromMs, parseDurationMs } from "../duration.js";
import type { BackendTlsIR, EffectivePolicyIR, ListenerIR, PolicySourceIR } from "../ir.js";
import { SLUICE_AUTHZ_CLUSTER } from "../names.js";
import { endFormat, toEnvoyCel } from "./filters/envoy-cel.js";
import type { BuildContext } from "./filters/types.js";
import { type Collector, type CollectorContext, collector } from "./frontend-collector.js";
import {
  metricsLogger,
  requestCel,
  TELEMETRY_SCHEMAS,
  tracingResources,
  tracingSampling,
} from "./frontend-telemetry.js";
import {
  metadataTag,
  sluiceComputes,
  telemetryContextFilter,
  telemetryValue,
  tracingValue,
} from "./tracing-context.js";

type HcmInit = Exclude<MessageInitShape<typeof HttpConnectionManagerSchema>, { $typeName: string }>;
type ListenerInit = Exclude<MessageInitShape<typeof ListenerSchema>, { $typeName: string }>;

export const FRONTEND_SCHEMAS = [
  OpenTelemetryConfigSchema,
  OpenTelemetryAccessLogConfigSchema,
  ProxyProtocolSchema,
  StdoutAccessLogSchema,
  CelSchema,
  PreserveCaseFormatterConfigSchema,
  ...TELEMETRY_SCHEMAS,
] as const;

/** Downstream TLS of an HTTPS port (`frontend.tls`), for each filter chain's DownstreamTlsContext. */
export interface FrontendTls {
  readonly minVersion?: TlsParameters_TlsProtocol;
  readonly maxVersion?: TlsParameters_TlsProtocol;
  /** TLS 1.2 suites in BoringSSL's names (TLS 1.3 suites cannot be chosen in BoringSSL). */
  readonly cipherSuites?: readonly string[];
  readonly ecdhCurves?: readonly string[];
  readonly alpn?: readonly string[];
  readonly handshakeTimeoutMs?: number;
}

/** What a Gateway port's frontend policy adds to its listener and to each HttpConnectionManager on it. */
export interface FrontendOptions {
  readonly hcm: Partial<HcmInit>;
  readonly listener: Partial<ListenerInit>;
  /** Listener filters, before TLS inspection. */
  readonly listenerFilters: NonNullable<ListenerInit["listenerFilters"]>;
  readonly tls?: FrontendTls;
  /** Clusters the listener's options call (the OTLP collectors of tracing and the access log). */
  readonly clusters?: readonly Cluster[];
  /** The backend policy TLS of those collector clusters, by cluster name (SDS client certificates, the span relay). */
  readonly collectorTls?: ReadonlyMap<string, BackendTlsIR>;
  /** `connect.mode`: Deny (listener.ts answers CONNECT 403), Route or Tunnel (route.ts connect routes). */
  readonly connect?: string;
  /** HTTP filters of the whole listener, first in its chain and enabled on every route (tracing-context.ts). */
  readonly httpFilters?: readonly MessageInitShape<typeof HttpFilterSchema>[];
}

const TLS_VERSION: Readonly<Record<string, TlsParameters_TlsProtocol>> = {
  "1.2": TlsParameters_TlsProtocol.TLSv1_2,
  "1.3": TlsParameters_TlsProtocol.TLSv1_3,
};

/** The spec's TLS 1.2 suite names → BoringSSL's. */
const TLS12_SUITES: Readonly<Record<string, string>> = {
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: "ECDHE-ECDSA-AES256-GCM-SHA384",
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: "ECDHE-ECDSA-AES128-GCM-SHA256",
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-ECDSA-CHACHA20-POLY1305",
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: "ECDHE-RSA-AES256-GCM-SHA384",
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: "ECDHE-RSA-AES128-GCM-SHA256",
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-RSA-CHACHA20-POLY1305",
};

const CURVES: Readonly<Record<string, string>> = {
  X25519: "X25519",
  "P-256": "P-256",
  "P-384": "P-384",
  X25519_MLKEM768: "X25519MLKEM768",
};

/** `frontend.tls` → the TLS parameters; the TLS 1.3 suites, which BoringSSL does not let one choose, are reported. */
function frontendTls(t: Rec, note: (field: string, message: string) => void): FrontendTls {
  const out: { -readonly [K in keyof FrontendTls]: FrontendTls[K] } = {};
  const min = TLS_VERSION[str(t.minProtocolVersion) ?? ""];
  const max = TLS_VERSION[str(t.maxProtocolVersion) ?? ""];
  if (min !== undefined) out.minVersion = min;
  if (max !== undefined) out.maxVersion = max;
  if (Array.isArray(t.cipherSuites) && t.cipherSuites.length > 0) {
    const names = t.cipherSuites.map(String);
    const tls12 = names.flatMap((n) => (TLS12_SUITES[n] !== undefined ? [TLS12_SUITES[n]] : []));
    if (names.some((n) => n.startsWith("TLS13_"))) {
      note("cipherSuites", "TLS 1.3 suites cannot be chosen in Envoy (BoringSSL enables all three); they stay enabled");
    }
    if (tls12.length > 0) out.cipherSuites = tls12;
    else {
      // Only TLS 1.3 suites listed: no TLS 1.2 suite is allowed, so TLS 1.2 cannot be negotiated.
      out.minVersion = TlsParameters_TlsProtocol.TLSv1_3;
    }
  }
  if (Array.isArray(t.keyExchangeGroups) && t.keyExchangeGroups.length > 0) {
    out.ecdhCurves = t.keyExchangeGroups.map((g) => CURVES[String(g)] ?? String(g));
  }
  if (Array.isArray(t.alpnProtocols)) out.alpn = t.alpnProtocols.map(String);
  const handshake = ms(t.handshakeTimeout);
  if (handshake !== undefined) out.handshakeTimeoutMs = handshake;
  return out;
}

const NONE: FrontendOptions = { hcm: {}, listener: {}, listenerFilters: [] };

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown) => (typeof v === "string" ? v : undefined);
const num = (v: unknown) => (typeof v === "number" ? v : undefined);
const ms = (v: unknown) => (typeof v === "string" ? parseDurationMs(v) : undefined);
const bytes = (v: unknown) => (typeof v === "string" || typeof v === "number" ? parseByteSize(v) : undefined);

/** Fields of the access log entry when `attributes.remove` drops none (Envoy command operators). */
export const DEFAULT_LOG_FIELDS: Readonly<Record<string, string>> = {
  start_time: "%START_TIME%",
  method: "%REQ(:METHOD)%",
  path: "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
  protocol: "%PROTOCOL%",
  authority: "%REQ(:AUTHORITY)%",
  status: "%RESPONSE_CODE%",
  response_flags: "%RESPONSE_FLAGS%",
  duration_ms: "%DURATION%",
  bytes_received: "%BYTES_RECEIVED%",
  bytes_sent: "%BYTES_SENT%",
  upstream_host: "%UPSTREAM_HOST%",
  source_address: "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
  user_agent: "%REQ(USER-AGENT)%",
  request_id: "%REQ(X-REQUEST-ID)%",
  route_name: "%ROUTE_NAME%",
};

/** Linux socket option numbers (the listener's socket options are raw setsockopt calls). */
const SOL_SOCKET = 1n;
const SO_KEEPALIVE = 9n;
const IPPROTO_TCP = 6n;
const TCP_KEEPIDLE = 4n;
const TCP_KEEPINTVL = 5n;
const TCP_KEEPCNT = 6n;

export function frontendOptions(l: ListenerIR, ctx: BuildContext | undefined): FrontendOptions {
  const policy: EffectivePolicyIR | undefined = l.policy?.frontend;
  if (policy === undefined) return NONE;
  const hcm: Partial<HcmInit> = {};
  const listener: Partial<ListenerInit> = {};
  const listenerFilters: NonNullable<ListenerInit["listenerFilters"]> = [];
  const field = (name: string): { value: Rec; from: PolicySourceIR } | undefined => {
    const f = policy[name];
    if (f === undefined || "combined" in f || !isRec(f.value)) return undefined;
    return { value: f.value, from: f.from };
  };
  const note = (from: PolicySourceIR, name: string, message: string) => ctx?.note(from, name, message);

  const http = field("http");
  if (http !== undefined) {
    const h = http.value;
    const common: Rec = {};
    const idle = ms(h.http1IdleTimeout);
    if (idle !== undefined) common.idleTimeout = durationFromMs(idle);
    if (num(h.http1MaxHeaders) !== undefined) common.maxHeadersCount = num(h.http1MaxHeaders);
    const maxDuration = ms(h.maxConnectionDuration);
    if (maxDuration !== undefined) common.maxConnectionDuration = durationFromMs(maxDuration);
    if (Object.keys(common).length > 0) hcm.commonHttpProtocolOptions = common;
    if (h.http1HeaderCase === "Preserve") {
      hcm.httpProtocolOptions = {
        headerKeyFormat: {
          headerFormat: {
            case: "statefulFormatter",
            value: {
              name: "envoy.http.stateful_header_formatters.preserve_case",
              typedConfig: anyPack(PreserveCaseFormatterConfigSchema, create(PreserveCaseFormatterConfigSchema)),
            },
          },
        },
      };
    }
    const h2: Rec = {};
    const stream = bytes(h.http2WindowSize);
    const connection = bytes(h.http2ConnectionWindowSize);
    // Envoy's bounds: 65535 .. 2^31 - 1.
    const window = (n: number) => Math.min(2 ** 31 - 1, Math.max(65535, n));
    if (stream !== undefined) h2.initialStreamWindowSize = window(stream);
    if (connection !== undefined) h2.initialConnectionWindowSize = window(connection);
    const interval = ms(h.http2KeepaliveInterval);
    const timeout = ms(h.http2KeepaliveTimeout);
    if (interval !== undefined || timeout !== undefined) {
      h2.connectionKeepalive = {
        ...(interval !== undefined ? { interval: durationFromMs(interval) } : {}),
        // Envoy requires a timeout; its own default when pings are sent is 20 s... written out here.
        timeout: durationFromMs(timeout ?? 20_000),
      };
    }
    const frame = bytes(h.http2FrameSize);
    // Envoy has no named field for SETTINGS_MAX_FRAME_SIZE (0x5), but sends it as a custom SETTINGS parameter and its
    // codec then accepts frames up to that size. The default (16 KiB) is HTTP/2's own: nothing to send.
    if (frame !== undefined && frame !== 16_384) {
      h2.customSettingsParameters = [{ identifier: 5, value: frame }];
    }
    if (Object.keys(h2).length > 0) hcm.http2ProtocolOptions = h2;
    const headerBytes = bytes(h.http2MaxHeaderSize);
    // Envoy's limit covers every HTTP version, so the spec's HTTP/2 default (16 KiB, which the schema fills in) is
    // not applied: only a size the policy chose replaces Envoy's own (60 KiB).
    if (headerBytes !== undefined && headerBytes !== 16 * 1024) {
      // Envoy's limit is per request for every HTTP version, in KiB (1 .. 8192).
      hcm.maxRequestHeadersKb = Math.min(8192, Math.max(1, Math.ceil(headerBytes / 1024)));
    }
    const buffer = bytes(h.maxBufferSize);
    if (buffer !== undefined) listener.perConnectionBufferLimitBytes = buffer;
  }

  const tcp = field("tcp");
  const keepalive = tcp !== undefined && isRec(tcp.value.keepalive) ? tcp.value.keepalive : undefined;
  if (keepalive !== undefined) {
    const seconds = (v: unknown) => BigInt(Math.max(1, Math.round((ms(v) ?? 180_000) / 1000)));
    listener.socketOptions = [
      { level: SOL_SOCKET, name: SO_KEEPALIVE, value: { case: "intValue", value: 1n } },
      { level: IPPROTO_TCP, name: TCP_KEEPIDLE, value: { case: "intValue", value: seconds(keepalive.time) } },
      { level: IPPROTO_TCP, name: TCP_KEEPINTVL, value: { case: "intValue", value: seconds(keepalive.interval) } },
      {
        level: IPPROTO_TCP,
        name: TCP_KEEPCNT,
        value: { case: "intValue", value: BigInt(num(keepalive.retries) ?? 9) },
      },
    ];
  }

  const proxy = field("proxyProtocol");
  if (proxy !== undefined) {
    const version = str(proxy.value.version) ?? "V2";
    listenerFilters.push({
      name: "envoy.filters.listener.proxy_protocol",
      configType: {
        case: "typedConfig",
        value: anyPack(
          ProxyProtocolSchema,
          create(ProxyProtocolSchema, {
            allowRequestsWithoutProxyProtocol: proxy.value.mode === "Optional",
            disallowedVersions:
              version === "V1"
                ? [ProxyProtocolConfig_Version.V2]
                : version === "V2"
                  ? [ProxyProtocolConfig_Version.V1]
                  : [],
          }),
        ),
      },
    });
  }

  const collectors: Collector[] = [];
  // Values Sluice's telemetry stage computes for the access logs and the tracer (one stage per listener).
  const telemetryValues: ContextValue[] = [];
  // What a collector's own backend policy (its Service's GwPolicy) needs said goes on that policy.
  const collectorContext = (from: PolicySourceIR) => ({
    input: ctx?.authz?.input,
    policyNs: from.name.split("/")[0] ?? "",
    refBackends: l.policy?.refBackends,
    noteOn: (on: PolicySourceIR, f: string, m: string) => note(on, f, m),
  });
  const log = field("accessLog");
  if (log !== undefined) {
    const logs = accessLog(log.value, collectorContext(log.from), (f, m) => note(log.from, `accessLog.${f}`, m));
    hcm.accessLog = logs.entries;
    if (logs.collector !== undefined) collectors.push(logs.collector);
    telemetryValues.push(...logs.values);
  }

  const tlsField = field("tls");
  let tls: FrontendTls | undefined;
  if (tlsField !== undefined) {
    if (l.protocol === "HTTPS") tls = frontendTls(tlsField.value, (f, m) => note(tlsField.from, `tls.${f}`, m));
    else note(tlsField.from, "tls", `port ${l.port} is plain HTTP: no TLS to set`);
  }

  const tracingField = field("tracing");
  const httpFilters: NonNullable<FrontendOptions["httpFilters"]>[number][] = [];
  if (tracingField !== undefined) {
    const t = tracing(tracingField.value, l, {
      ...collectorContext(tracingField.from),
      field: "tracing",
      note: (f, m) => note(tracingField.from, `tracing${f === "" ? "" : `.${f}`}`, m),
    });
    if (t !== undefined) {
      hcm.tracing = t.tracing;
      collectors.push(t.collector);
      telemetryValues.push(...t.values);
    }
  }
  const collectorTls = new Map(collectors.flatMap((c) => (c.tls !== undefined ? [[c.clusterName, c.tls]] : [])));

  const metrics = field("metrics");
  if (metrics !== undefined) {
    const logger = metricsLogger(metrics.value, (f, m) => note(metrics.from, `metrics.${f}`, m), telemetryValues);
    if (logger !== undefined) hcm.accessLog = [...(hcm.accessLog ?? []), logger];
  }
  if (telemetryValues.length > 0) httpFilters.push(telemetryContextFilter(telemetryValues));
  // CONNECT: unset 405, Deny 403 (listener.ts), Route a tunnel per matching route, Tunnel a tunnel back into the
  // Gateway port the CONNECT names (build.ts, route.ts).
  const connectField = policy.connect;
  let connect: string | undefined;
  if (connectField !== undefined && !("combined" in connectField)) {
    connect = isRec(connectField.value) ? str(connectField.value.mode) : undefined;
    if (connect !== "Deny" && connect !== "Route" && connect !== "Tunnel") {
      note(
        connectField.from,
        "connect.mode",
        `${connect ?? "this mode"} is not served yet: CONNECT requests are answered 405 as when connect is unset`,
      );
    }
  }
  return {
    hcm,
    listener,
    listenerFilters,
    clusters: collectors.map((c) => c.cluster),
    ...(collectorTls.size > 0 ? { collectorTls } : {}),
    ...(tls !== undefined ? { tls } : {}),
    ...(connect === "Deny" || connect === "Route" || connect === "Tunnel" ? { connect } : {}),
    ...(httpFilters.length > 0 ? { httpFilters } : {}),
  };
}

/** Tracing expressions neither Envoy nor Sluice's tracing stage can evaluate. */
const NOT_SLUICE =
  "Envoy cannot evaluate this expression as the spec means it, and Sluice's tracing stage cannot either (it does not compile)";

const NOT_IN_ENVOY =
  "Envoy cannot evaluate this expression as the spec means it (it reads basicAuth or extauthz, request.query other than by a literal name, or uses the spec's IP functions; span tags also lack string conversion and string functions)";

/** A CEL expression's parsed AST; undefined when it does not compile. */
function celAst(text: string): Expr | undefined {
  const c = compileExpression(text);
  return "ok" in c ? c.ok.ast.expr : undefined;
}

/**
 * `frontend.tracing` → the HCM's OpenTelemetry tracer, exporting to the collector of `backendRef` (a Service, or a
 * static GwBackend) over OTLP gRPC or HTTP. Sampling, span attributes, resource attributes and `filter` are applied
 * when Envoy can evaluate them (expressions it cannot are reported); with `attributes.remove` or a `filter` that
 * reads more than the request, Envoy exports to Sluice's span relay, which applies them and sends the export on.
 */
function tracing(
  t: Rec,
  l: ListenerIR,
  at: CollectorContext,
): { tracing: HcmInit["tracing"]; collector: Collector; values: ContextValue[] } | undefined {
  const note = at.note;
  const grpc = t.protocol !== "HTTP";
  const c = collector("tracing", t.backendRef, grpc, at);
  if (c === undefined) return undefined;
  const { clusterName, host, name } = c;
  const customTags: MessageInitShape<typeof CustomTagSchema>[] = [];
  // What Envoy cannot evaluate, Sluice computes per request into dynamic metadata a `metadata` tag reads.
  const values: ContextValue[] = [];
  const attributes = isRec(t.attributes) ? t.attributes : {};
  (Array.isArray(attributes.add) ? attributes.add : []).forEach((a, i) => {
    if (!isRec(a) || typeof a.name !== "string" || typeof a.expression !== "string") return;
    const ast = celAst(a.expression);
    const literal = ast === undefined ? undefined : constValue(ast);
    const header = ast === undefined ? undefined : requestHeaderName(ast);
    if (literal !== undefined)
      customTags.push({ tag: a.name, type: { case: "literal", value: { value: String(literal) } } });
    else if (header !== undefined) {
      customTags.push({ tag: a.name, type: { case: "requestHeader", value: { name: header } } });
    } else {
      // Custom tags are set when the span finishes: the response and what filters left in metadata are known.
      const format = endFormat(a.expression);
      if (format !== undefined) customTags.push({ tag: a.name, type: { case: "value", value: format } });
      else if (sluiceComputes(a.expression)) {
        customTags.push(metadataTag(a.name, i));
        values.push(tracingValue(a.expression, i));
      } else note(`attributes.add[${i}]`, `${NOT_SLUICE}; left out`);
    }
  });
  // `remove` names default attributes: one the policy also adds keeps the added value.
  const added = new Set(customTags.map((c) => c.tag));
  const remove = [...new Set(Array.isArray(attributes.remove) ? attributes.remove.map(String) : [])].filter(
    (n) => !added.has(n),
  );
  // A filter of the request alone is part of the sampling decision (frontend-telemetry.ts); one reading more is
  // evaluated when the span finishes, into a span attribute the relay drops the span by.
  const filterText = str(t.filter);
  const requestFilter = filterText !== undefined && requestCel(filterText) !== undefined;
  let filter = false;
  if (filterText !== undefined && !requestFilter) {
    const format = endFormat(filterText);
    if (format !== undefined) {
      customTags.push({ tag: FILTER_TAG, type: { case: "value", value: format } });
      filter = true;
    } else if (sluiceComputes(filterText)) {
      customTags.push(metadataTag(FILTER_TAG));
      values.push(tracingValue(filterText));
      filter = true;
    } else note("filter", `${NOT_SLUICE}; every sampled span is exported`);
  }
  const resources = tracingResources(t.resources, note);
  const sampled = tracingSampling(requestFilter ? t : { ...t, filter: undefined }, note);
  const path = str(t.path) ?? "/v1/traces";
  // What Envoy's tracer cannot do itself (leave out its default attributes, decide on a span when it finishes) goes
  // through Sluice's span relay (src/otlp/relay.ts), which sends the export on to the collector.
  const relay: RelaySpec | undefined =
    remove.length > 0 || filter
      ? { cluster: clusterName, protocol: grpc ? "GRPC" : "HTTP", path, authority: name, remove, filter }
      : undefined;
  const otel = create(OpenTelemetryConfigSchema, {
    serviceName: `${l.name}`,
    ...(resources !== undefined ? { resourceDetectors: [resources] } : {}),
    ...(sampled.sampler !== undefined ? { sampler: sampled.sampler } : {}),
    ...(relay !== undefined
      ? {
          grpcService: {
            targetSpecifier: { case: "envoyGrpc", value: { clusterName: SLUICE_AUTHZ_CLUSTER } },
            initialMetadata: [{ key: RELAY_METADATA, value: encodeRelaySpec(relay) }],
            timeout: durationFromMs(5000),
          },
        }
      : grpc
        ? {
            grpcService: {
              targetSpecifier: { case: "envoyGrpc", value: { clusterName, authority: name } },
              timeout: durationFromMs(5000),
            },
          }
        : {
            httpService: {
              httpUri: {
                uri: `${c.tls !== undefined ? "https" : "http"}://${host}${path}`,
                httpUpstreamType: { case: "cluster", value: clusterName },
                timeout: durationFromMs(5000),
              },
            },
          }),
  });
  return {
    collector: c,
    values,
    tracing: {
      provider: {
        name: "envoy.tracers.opentelemetry",
        configType: { case: "typedConfig", value: anyPack(OpenTelemetryConfigSchema, otel) },
      },
      randomSampling: { value: sampled.random },
      clientSampling: { value: sampled.client },
      customTags,
    },
  };
}

/** The access log entry: JSON lines on stdout, default fields minus `remove`, plus `add` as Envoy CEL. */
/** The entry's fields: the defaults minus `remove`, plus `add` as Envoy CEL; whether any is CEL. */
function logFields(
  attributesValue: unknown,
  note: (field: string, message: string) => void,
  values: ContextValue[],
  prefix: string,
) {
  const attributes = isRec(attributesValue) ? attributesValue : {};
  const fields: Record<string, string> = { ...DEFAULT_LOG_FIELDS };
  for (const name of Array.isArray(attributes.remove) ? attributes.remove : []) delete fields[String(name)];
  let cel = false;
  (Array.isArray(attributes.add) ? attributes.add : []).forEach((x, i) => {
    if (!isRec(x) || typeof x.name !== "string" || typeof x.expression !== "string") return;
    const expr = toEnvoyCel(x.expression, { atEnd: true, queryParams: true });
    if (expr !== undefined) {
      fields[x.name] = `%CEL(${expr})%`;
      cel = true;
    } else if (sluiceComputes(x.expression)) {
      // Computed by Sluice's telemetry stage into dynamic metadata before the entry is written (tracing-context.ts).
      const v = telemetryValue(x.expression, `${prefix}.attributes.${i}`);
      values.push(v);
      fields[x.name] = `%DYNAMIC_METADATA(${v.namespace}:${v.key})%`;
    } else {
      note(`attributes.add[${i}]`, `${NOT_IN_ENVOY}; left out`);
    }
  });
  return { fields, cel };
}

/**
 * `filter` as Envoy's CEL access log filter, or, for an expression Envoy cannot evaluate as the spec means it, a
 * metadata filter on the value Sluice's telemetry stage computed (`true` logs; anything else, a failure included,
 * does not). Undefined (every entry) when absent or not evaluable at all.
 */
function logFilter(
  text: unknown,
  note: (field: string, message: string) => void,
  values: ContextValue[],
  prefix: string,
): MessageInitShape<typeof AccessLogSchema>["filter"] {
  if (typeof text !== "string") return undefined;
  const expr = toEnvoyCel(text, { atEnd: true, queryParams: true });
  if (expr === undefined && sluiceComputes(text)) {
    const v = telemetryValue(text, `${prefix}.filter`);
    values.push(v);
    return {
      filterSpecifier: {
        case: "metadataFilter",
        value: {
          matcher: {
            filter: v.namespace,
            path: [{ segment: { case: "key", value: v.key } }],
            value: { matchPattern: { case: "stringMatch", value: { matchPattern: { case: "exact", value: "true" } } } },
          },
          matchIfKeyNotFound: false,
        },
      },
    };
  }
  if (expr === undefined) {
    note("filter", `${NOT_IN_ENVOY}; every entry is logged`);
    return undefined;
  }
  return {
    filterSpecifier: {
      case: "extensionFilter",
      value: {
        name: "envoy.access_loggers.extension_filters.cel",
        configType: {
          case: "typedConfig",
          value: anyPack(
            ExpressionFilterSchema,
            create(ExpressionFilterSchema, { expression: expr, celConfig: CEL_CONFIG }),
          ),
        },
      },
    },
  };
}

/** Envoy's CEL with the string functions and concatenation the spec's expressions may use (off by default). */
const CEL_CONFIG = { enableStringConversion: true, enableStringConcat: true, enableStringFunctions: true };

const CEL_FORMATTER = () => [
  { name: "envoy.formatter.cel", typedConfig: anyPack(CelSchema, create(CelSchema, { celConfig: CEL_CONFIG })) },
];

/**
 * The access logs: JSON lines on stdout, and with `otlp` also OTLP log records to its collector (gRPC, or HTTP at
 * `path`), whose `filter` and `attributes` default to the parent's.
 */
function accessLog(
  a: Rec,
  at: Omit<CollectorContext, "note" | "field">,
  note: (field: string, message: string) => void,
): { entries: MessageInitShape<typeof AccessLogSchema>[]; collector?: Collector; values: ContextValue[] } {
  const values: ContextValue[] = [];
  const { fields, cel } = logFields(a.attributes, note, values, "accesslog");
  const filter = logFilter(a.filter, note, values, "accesslog");
  const entries: MessageInitShape<typeof AccessLogSchema>[] = [
    {
      name: "envoy.access_loggers.stdout",
      ...(filter !== undefined ? { filter } : {}),
      configType: {
        case: "typedConfig",
        value: anyPack(
          StdoutAccessLogSchema,
          create(StdoutAccessLogSchema, {
            accessLogFormat: {
              case: "logFormat",
              value: {
                format: { case: "jsonFormat", value: fields },
                // A value that is missing or an attribute whose expression fails is left out of the entry.
                omitEmptyValues: true,
                ...(cel ? { formatters: CEL_FORMATTER() } : {}),
              },
            },
          }),
        ),
      },
    },
  ];
  if (!isRec(a.otlp)) return { entries, values };
  const o = a.otlp;
  const otlpNote = (f: string, m: string) => note(`otlp.${f}`, m);
  const grpc = o.protocol !== "HTTP";
  const c = collector("accesslog", o.backendRef, grpc, { ...at, field: "accessLog.otlp", note: otlpNote });
  if (c === undefined) return { entries, values };
  const own =
    o.attributes !== undefined ? logFields(o.attributes, otlpNote, values, "accesslog.otlp") : { fields, cel };
  const otlpFilter = o.filter !== undefined ? logFilter(o.filter, otlpNote, values, "accesslog.otlp") : filter;
  const path = str(o.path) ?? "/v1/logs";
  const config = create(OpenTelemetryAccessLogConfigSchema, {
    logName: "sluice",
    statPrefix: "sluice_otlp",
    ...(grpc
      ? {
          grpcService: {
            targetSpecifier: { case: "envoyGrpc", value: { clusterName: c.clusterName, authority: c.name } },
            timeout: durationFromMs(5000),
          },
        }
      : {
          httpService: {
            httpUri: {
              uri: `${c.tls !== undefined ? "https" : "http"}://${c.host}${path}`,
              httpUpstreamType: { case: "cluster", value: c.clusterName },
              timeout: durationFromMs(5000),
            },
          },
        }),
    body: {
      value: { case: "stringValue", value: "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %RESPONSE_CODE%" },
    },
    attributes: {
      values: Object.entries(own.fields).map(([key, v]) => ({
        key,
        value: { value: { case: "stringValue" as const, value: v } },
      })),
    },
    ...(own.cel ? { formatters: CEL_FORMATTER() } : {}),
  });
  entries.push({
    name: "envoy.access_loggers.open_telemetry",
    ...(otlpFilter !== undefined ? { filter: otlpFilter } : {}),
    configType: { case: "typedConfig", value: anyPack(OpenTelemetryAccessLogConfigSchema, config) },
  });
  return { entries, collector: c, values };
}
