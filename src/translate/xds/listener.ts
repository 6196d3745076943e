// ListenerIR → Envoy Listener with one HttpConnectionManager whose routes come over RDS (ADS).

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { type AccessLogFilterSchema, ComparisonFilter_Op } from "../../gen/envoy/config/accesslog/v3/accesslog_pb.js";
import { HeaderValueOption_HeaderAppendAction } from "../../gen/envoy/config/core/v3/base_pb.js";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import { type Listener, ListenerSchema } from "../../gen/envoy/config/listener/v3/listener_pb.js";
import { ExpressionFilterSchema } from "../../gen/envoy/extensions/access_loggers/filters/cel/v3/cel_pb.js";
import { TlsInspectorSchema } from "../../gen/envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector_pb.js";
import {
  HttpConnectionManager_CodecType,
  HttpConnectionManagerSchema,
  type ResponseMapperSchema,
} from "../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import { DownstreamTlsContextSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb.js";
import type { ValueMatcherSchema } from "../../gen/envoy/type/matcher/v3/value_pb.js";
import { durationFromMs } from "../duration.js";
import type { FilterChainIR, ListenerIR } from "../ir.js";
import { MCP_OAUTH_CHALLENGE, MCP_OAUTH_METADATA_KEY } from "../mcp/oauth-routes.js";
import { type EarlyRequestHeaders, earlyHeaderMutationExtension } from "./early-headers.js";
import type { FilterChainResult } from "./filters/chain.js";
import { JWT_FAILURE_KEY, JWT_HEADER_KEY } from "./filters/jwt-authn.js";
import { BUFFER_RESPONSE_METADATA_KEY, RESPONSE_BUFFER_FILTER } from "./filters/route-scoped.js";
import { SLUICE_ROUTE_METADATA } from "./filters/types.js";
import type { FrontendOptions, FrontendTls } from "./frontend.js";
import { LLM_ROUTER_FILTER } from "./llm.js";
import type { NetworkFilter } from "./network-authz.js";

type HttpFilters = FilterChainResult["httpFilters"];

function buildHcm(
  chain: FilterChainIR,
  httpFilters: HttpFilters,
  early: EarlyRequestHeaders | undefined,
  frontend: ListenerOptions,
) {
  return create(HttpConnectionManagerSchema, {
    // The Gateway's frontend policy (protocol options, access log), under what Sluice itself sets.
    ...frontend.hcm,
    statPrefix: chain.name,
    codecType: HttpConnectionManager_CodecType.AUTO,
    routeSpecifier: {
      case: "rds",
      value: {
        routeConfigName: chain.routeConfigName,
        configSource: { configSourceSpecifier: { case: "ads", value: {} }, resourceApiVersion: ApiVersion.V3 },
      },
    },
    normalizePath: true,
    mergeSlashes: true,
    useRemoteAddress: true,
    // The frontend's listener-wide filters (tracing-context.ts) go first: on the response path they run last.
    httpFilters: [...(frontend.httpFilters ?? []), ...httpFilters],
    ...localReplyConfig(httpFilters, frontend.connect, frontend.mcpOAuth === true),
    // PreRouting request header modifiers, before the route is chosen (early-headers.ts).
    ...(early !== undefined ? { earlyHeaderMutationExtensions: [earlyHeaderMutationExtension(early.value)] } : {}),
  });
}

/** The frontend's options, and whether a route of the listener serves MCP OAuth (translate/mcp/oauth-routes.ts). */
export type ListenerOptions = FrontendOptions & { readonly mcpOAuth?: boolean };

function localReplyConfig(httpFilters: HttpFilters, connect: string | undefined, mcpOAuth: boolean) {
  const mappers = [
    // Route and Tunnel: a CONNECT no route takes keeps Envoy's 404, as any request no route takes.
    ...(connect === "Route" || connect === "Tunnel" ? [] : [connectReply(connect === "Deny" ? 403 : 405)]),
    // First: on an MCP OAuth route the 401 (and jwt_authn's 403 for a token it refused) also points to the protected
    // resource metadata (translate/mcp/oauth-routes.ts); the first matching mapper is the one applied.
    ...(httpFilters.some((f) => f.name?.startsWith(JWT_FILTER))
      ? [...(mcpOAuth ? [MCP_OAUTH_401] : []), ...JWT_401_REPLY.mappers]
      : []),
    ...(httpFilters.some((f) => f.name === RESPONSE_BUFFER_FILTER) ? [RESPONSE_TOO_LARGE_502] : []),
    ...(httpFilters.some((f) => f.name === LLM_ROUTER_FILTER) ? LLM_PROCESSOR_FAILED : []),
  ];
  return mappers.length === 0 ? {} : { localReplyConfig: { mappers } };
}

/**
 * CONNECT without `frontend.connect` is answered 405 (spec), and 403 with mode Deny. Envoy opens no tunnel without
 * CONNECT in the HCM's upgrade configs, and no route matches a CONNECT without a connect_matcher: the request always
 * ends in a local reply (404, no route), which this mapper turns into the spec's answer.
 */
function connectReply(status: 403 | 405): MessageInitShape<typeof ResponseMapperSchema> {
  return {
    filter: {
      filterSpecifier: {
        case: "headerFilter",
        value: {
          header: {
            name: ":method",
            headerMatchSpecifier: { case: "stringMatch", value: { matchPattern: { case: "exact", value: "CONNECT" } } },
          },
        },
      },
    },
    statusCode: status,
    // RFC 9110 §15.5.6: a 405 says which methods are allowed (every standard one but CONNECT; routes decide the rest).
    ...(status === 405
      ? { headersToAdd: [{ header: { key: "allow", value: "GET, HEAD, POST, PUT, DELETE, OPTIONS, TRACE, PATCH" } }] }
      : {}),
    body: {
      specifier: {
        case: "inlineString",
        value: status === 405 ? "CONNECT is not allowed here\n" : "CONNECT is denied by policy\n",
      },
    },
  };
}

/**
 * The spec answers a response above `buffer.response.maxBytes` with 502; Envoy's file system buffer filter answers
 * it with a local 500 without response code details. Only on routes marked as buffering responses (route metadata),
 * and only for a 500 without details (other filters' local 500s, e.g. ext_proc failures, carry details), it becomes 502.
 */
const RESPONSE_TOO_LARGE_502: MessageInitShape<typeof ResponseMapperSchema> = {
  filter: {
    filterSpecifier: {
      case: "extensionFilter" as const,
      value: {
        name: "sluice.response_too_large",
        configType: {
          case: "typedConfig" as const,
          value: anyPack(
            ExpressionFilterSchema,
            create(ExpressionFilterSchema, {
              expression:
                "response.code == 500 && response.code_details == '' && " +
                `xds.route_metadata.filter_metadata['${SLUICE_ROUTE_METADATA}']['${BUFFER_RESPONSE_METADATA_KEY}'] == true`,
            }),
          ),
        },
      },
    },
  },
  statusCode: 502,
};

/**
 * Envoy's own 500 when an ext_proc call fails (Sluice unreachable, killed mid-request, or past the message timeout):
 * response code details `ext_proc_error_...`, an empty body, and no ext_proc left to translate it. An LLM client
 * gets it in its own wire format instead, told by the request path as Sluice's route types are (Anthropic Messages
 * and token counting, Google's model methods, else OpenAI's error object), so its SDK raises its usual API error
 * with a message. docs/faults.md; test/e2e/faults-sluice.test.ts.
 */
const LLM_PROCESSOR_FAILED: MessageInitShape<typeof ResponseMapperSchema>[] = (() => {
  const message = "the LLM gateway could not process this request (its processor is unavailable); retry";
  const failed = "response.code_details.startsWith('ext_proc_error')";
  const mapper = (name: string, where: string, body: unknown): MessageInitShape<typeof ResponseMapperSchema> => ({
    filter: {
      filterSpecifier: {
        case: "extensionFilter" as const,
        value: {
          name,
          configType: {
            case: "typedConfig" as const,
            value: anyPack(
              ExpressionFilterSchema,
              create(ExpressionFilterSchema, { expression: where === "" ? failed : `${failed} && ${where}` }),
            ),
          },
        },
      },
    },
    bodyFormatOverride: {
      format: {
        case: "textFormatSource" as const,
        value: { specifier: { case: "inlineString" as const, value: JSON.stringify(body) } },
      },
      contentType: "application/json",
    },
  });
  return [
    mapper(
      "sluice.llm_processor_failed_messages",
      "(request.url_path.endsWith('/messages') || request.url_path.endsWith('/messages/count_tokens'))",
      { type: "error", error: { type: "api_error", message } },
    ),
    mapper(
      "sluice.llm_processor_failed_google",
      "request.url_path.matches(':(generateContent|streamGenerateContent|countTokens)$')",
      { error: { code: 500, message, status: "INTERNAL" } },
    ),
    mapper("sluice.llm_processor_failed", "", {
      error: { message, type: "server_error", code: "processor_unavailable" },
    }),
  ];
})();

const JWT_FILTER = "envoy.filters.http.jwt_authn";

/** MCP authorization: a 401 carries `WWW-Authenticate: Bearer resource_metadata="<its metadata's URL>"`. */
const MCP_OAUTH_401: MessageInitShape<typeof ResponseMapperSchema> = {
  filter: {
    filterSpecifier: {
      case: "extensionFilter" as const,
      value: {
        name: "sluice.mcp_oauth_401",
        configType: {
          case: "typedConfig" as const,
          value: anyPack(
            ExpressionFilterSchema,
            create(ExpressionFilterSchema, {
              expression:
                `xds.route_metadata.filter_metadata['${SLUICE_ROUTE_METADATA}']['${MCP_OAUTH_METADATA_KEY}'] == true && ` +
                `(response.code == 401 || (response.code == 403 && '${JWT_FAILURE_KEY}' in metadata.filter_metadata['${JWT_FILTER}']))`,
            }),
          ),
        },
      },
    },
  },
  statusCode: 401,
  headersToAdd: [
    {
      header: { key: "www-authenticate", value: MCP_OAUTH_CHALLENGE },
      appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
    },
  ],
};

/**
 * The spec answers every failed JWT check with 401; Envoy's jwt_authn uses 403 when a valid token names another
 * audience. A 403 local reply with that failure recorded in jwt_authn's metadata is therefore rewritten to 401.
 * (Under Permissive a token for another audience is let through with the failure recorded, so a later 403 from
 * authorization would also read 401; the token was not valid for this audience, so 401 is defensible there too.)
 */
const JWT_401_REPLY: { mappers: MessageInitShape<typeof ResponseMapperSchema>[] } = {
  mappers: [
    {
      filter: andFilter([
        statusFilter(403),
        metadataFilter(JWT_FILTER, [JWT_FAILURE_KEY, "message"], {
          // Only the audience check: a 403 from authorization after a missing token (Optional) stays.
          matchPattern: {
            case: "stringMatch" as const,
            value: { matchPattern: { case: "prefix" as const, value: "Audiences in Jwt" } },
          },
        }),
      ]),
      statusCode: 401,
    },
    {
      // The `kid` check (filters/jwt-authn.ts) denies a verified token whose JOSE header has no `kid`: a 403 while
      // jwt_authn recorded a header without `kid` is an authentication failure. (RBAC's own metadata naming the
      // denying policy is written after the local reply is mapped, so it cannot be used here.)
      filter: andFilter([
        statusFilter(403),
        metadataFilter(JWT_FILTER, [JWT_HEADER_KEY], { matchPattern: { case: "presentMatch", value: true } }),
        // Absent → true; present → a `kid` string is never null → false.
        metadataFilter(JWT_FILTER, [JWT_HEADER_KEY, "kid"], { matchPattern: { case: "nullMatch", value: {} } }, true),
      ]),
      statusCode: 401,
      body: { specifier: { case: "inlineString" as const, value: "Jwt has no key id (kid)" } },
    },
  ],
};

function statusFilter(code: number): LogFilter {
  return {
    filterSpecifier: {
      case: "statusCodeFilter" as const,
      value: {
        comparison: {
          op: ComparisonFilter_Op.EQ,
          value: { defaultValue: code, runtimeKey: `sluice.local_reply_${code}` },
        },
      },
    },
  };
}

type LogFilter = MessageInitShape<typeof AccessLogFilterSchema>;

function andFilter(filters: LogFilter[]): LogFilter {
  return { filterSpecifier: { case: "andFilter" as const, value: { filters } } };
}

/** Dynamic metadata `filter`/`path` matches `value`; a missing key gives `ifNotFound`. */
function metadataFilter(
  filter: string,
  path: string[],
  value: MessageInitShape<typeof ValueMatcherSchema>,
  ifNotFound = false,
): LogFilter {
  return {
    filterSpecifier: {
      case: "metadataFilter" as const,
      value: {
        matcher: { filter, path: path.map((key) => ({ segment: { case: "key" as const, value: key } })), value },
        matchIfKeyNotFound: ifNotFound,
      },
    },
  };
}

function buildTransportSocket(chain: FilterChainIR, params: FrontendTls | undefined) {
  if (chain.tls === undefined) return undefined;
  const tlsParams = {
    ...(params?.minVersion !== undefined ? { tlsMinimumProtocolVersion: params.minVersion } : {}),
    ...(params?.maxVersion !== undefined ? { tlsMaximumProtocolVersion: params.maxVersion } : {}),
    ...(params?.cipherSuites !== undefined ? { cipherSuites: [...params.cipherSuites] } : {}),
    ...(params?.ecdhCurves !== undefined ? { ecdhCurves: [...params.ecdhCurves] } : {}),
  };
  const tls = create(DownstreamTlsContextSchema, {
    commonTlsContext: {
      tlsCertificateSdsSecretConfigs: chain.tls.secrets.map((name) => ({
        name,
        sdsConfig: { configSourceSpecifier: { case: "ads" as const, value: {} }, resourceApiVersion: ApiVersion.V3 },
      })),
      alpnProtocols: [...(params?.alpn ?? ["h2", "http/1.1"])],
      ...(Object.keys(tlsParams).length > 0 ? { tlsParams } : {}),
    },
  });
  return {
    name: "envoy.transport_sockets.tls",
    configType: { case: "typedConfig" as const, value: anyPack(DownstreamTlsContextSchema, tls) },
  };
}

/**
 * `filtersOf(chainName)` gives the HTTP filters of each filter chain (see filters/chain.ts); `networkFilters` run
 * before the HttpConnectionManager on every chain (L4 authorization).
 */
export function buildListener(
  l: ListenerIR,
  filtersOf: (chain: string) => HttpFilters,
  networkFilters: readonly NetworkFilter[] = [],
  earlyHeadersOf: (routeConfigName: string) => EarlyRequestHeaders | undefined = () => undefined,
  frontend: ListenerOptions = { hcm: {}, listener: {}, listenerFilters: [] },
): Listener {
  return create(ListenerSchema, {
    ...frontend.listener,
    name: l.name,
    address: {
      address: {
        case: "socketAddress",
        value: { address: l.address, portSpecifier: { case: "portValue", value: l.port } },
      },
    },
    // SNI is read before a chain is chosen.
    // The PROXY protocol header comes first on the connection, before any TLS.
    listenerFilters: [
      ...frontend.listenerFilters,
      ...(l.protocol === "HTTPS"
        ? [
            {
              name: "envoy.filters.listener.tls_inspector",
              configType: {
                case: "typedConfig" as const,
                value: anyPack(TlsInspectorSchema, create(TlsInspectorSchema)),
              },
            },
          ]
        : []),
    ],
    filterChains: l.filterChains.map((chain) => {
      const transportSocket = buildTransportSocket(chain, frontend.tls);
      return {
        name: chain.name,
        ...(chain.serverNames.length > 0 ? { filterChainMatch: { serverNames: [...chain.serverNames] } } : {}),
        ...(transportSocket !== undefined ? { transportSocket } : {}),
        // frontend.tls.handshakeTimeout: the TLS handshake must be done within it.
        ...(transportSocket !== undefined && frontend.tls?.handshakeTimeoutMs !== undefined
          ? { transportSocketConnectTimeout: durationFromMs(frontend.tls.handshakeTimeoutMs) }
          : {}),
        filters: [
          ...networkFilters,
          {
            name: "envoy.filters.network.http_connection_manager",
            configType: {
              case: "typedConfig" as const,
              value: anyPack(
                HttpConnectionManagerSchema,
                buildHcm(chain, filtersOf(chain.name), earlyHeadersOf(chain.routeConfigName), frontend),
              ),
            },
          },
        ],
      };
    }),
  });
}
