// traffic.jwtAuthentication → envoy.filters.http.jwt_authn. One instance per distinct configuration (providers are
// listener-level in Envoy); the route enables its instance and names the requirement. Verified claims go to dynamic
// metadata `envoy.filters.http.jwt_authn` / `jwt_payload`, where the authorization code (native RBAC or the Sluice
// ext_authz) reads `jwt.<claim>`. Envoy answers 401 itself, before any authorization filter runs.

import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { JWTAuthentication } from "../../../api/auth.js";
import type { Static } from "../../../api/schema-kit.js";
import { compileExpression } from "../../../cel/index.js";
import { JWT_PAYLOAD_KEY } from "../../../cel/rbac.js";
import { RBAC_Action } from "../../../gen/envoy/config/rbac/v3/rbac_pb.js";
import {
  JwtAuthenticationSchema,
  type JwtProviderSchema,
  type JwtRequirementSchema,
  PerRouteConfigSchema,
} from "../../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb.js";
import { RBACPerRouteSchema, RBACSchema } from "../../../gen/envoy/extensions/filters/http/rbac/v3/rbac_pb.js";
import { durationFromMs, parseDurationMs } from "../../duration.js";
import type { RouteIR } from "../../ir.js";
import { servesMcpOAuth } from "../../mcp/oauth-routes.js";
import { JWT_EXPRESSION_HEADER } from "./context.js";
import { instanceName, phaseFields, phaseOrder, serviceCluster } from "./policy-fields.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder, type RouteContribution } from "./types.js";

type Jwt = Static<typeof JWTAuthentication>;

const FILTER = "envoy.filters.http.jwt_authn";
/** Dynamic metadata key (namespace `envoy.filters.http.jwt_authn`) where a failed verification is recorded. */
export const JWT_FAILURE_KEY = "jwt_failure";
/** Dynamic metadata key (same namespace) holding the verified token's JOSE header. */
export const JWT_HEADER_KEY = "jwt_header";
/** The RBAC instance that rejects a verified token without `kid`; listener.ts answers its 403 with 401. */
export const JWT_KID_FILTER = "sluice.jwt_kid_required";
const JWT_KID_POLICY = "sluice-jwt-without-kid";
const REQUIREMENT = "sluice";
const JWKS_FETCH_TIMEOUT_MS = 5000;
const DEFAULT_CACHE_MS = 5 * 60_000;

const KEY_FIELDS: Readonly<Record<string, readonly string[]>> = {
  RSA: ["n", "e"],
  EC: ["crv", "x", "y"],
  OKP: ["crv", "x"],
  oct: ["k"],
};

/** Whether Envoy will find at least one key it can use in this JWKS (it rejects the listener otherwise). */
function usableJwks(text: string): boolean {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return false;
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) return false;
  return keys.some((k: unknown) => {
    if (typeof k !== "object" || k === null) return false;
    const key = k as Record<string, unknown>;
    const fields = KEY_FIELDS[String(key["kty"])];
    return fields?.every((f) => typeof key[f] === "string" && key[f] !== "") ?? false;
  });
}

const headerMetadata = (...path: string[]) => ({
  filter: FILTER,
  path: [JWT_HEADER_KEY, ...path].map((key) => ({ segment: { case: "key" as const, value: key } })),
  value: { matchPattern: { case: "presentMatch" as const, value: true } },
});

const KID_RBAC_CONFIG = create(RBACSchema, {
  rules: {
    action: RBAC_Action.DENY,
    policies: {
      [JWT_KID_POLICY]: {
        permissions: [{ rule: { case: "any", value: true } }],
        principals: [
          {
            identifier: {
              case: "andIds",
              value: {
                ids: [
                  { identifier: { case: "metadata", value: headerMetadata() } },
                  {
                    identifier: {
                      case: "notId",
                      value: { identifier: { case: "metadata", value: headerMetadata("kid") } },
                    },
                  },
                ],
              },
            },
          },
        ],
      },
    },
  },
});
const KID_RBAC = anyPack(RBACSchema, KID_RBAC_CONFIG);
// Envoy wants a config in every per-route entry; it is the same rule.
const KID_RBAC_PER_ROUTE = anyPack(RBACPerRouteSchema, create(RBACPerRouteSchema, { rbac: KID_RBAC_CONFIG }));

export const jwtAuthnBuilder: HttpFilterBuilder = {
  id: "jwt_authn",
  schemas: [JwtAuthenticationSchema, PerRouteConfigSchema, RBACSchema, RBACPerRouteSchema],
  forRoute(route: RouteIR, ctx): RouteContribution | undefined {
    const filters: FilterInstance[] = [];
    const clusters: NonNullable<RouteContribution["clusters"]>[number][] = [];
    for (const f of phaseFields<Jwt>(route, "jwtAuthentication")) {
      const jwt = f.value;
      const providers: Record<string, MessageInitShape<typeof JwtProviderSchema>> = {};
      jwt.providers.forEach((p, i) => {
        let jwks: MessageInitShape<typeof JwtProviderSchema>["jwksSourceSpecifier"];
        if (p.jwks.remote !== undefined) {
          const r = p.jwks.remote;
          const c = serviceCluster(route, `${f.path}.providers[${i}].jwks.remote.backendRef`, f.from, ctx, false);
          if (c.extra !== undefined) clusters.push(c.extra);
          const path = r.jwksPath.startsWith("/") ? r.jwksPath : `/${r.jwksPath}`;
          jwks = {
            case: "remoteJwks",
            value: {
              // The authority of the URI becomes the Host header of the fetch; the cluster decides where it goes.
              httpUri: {
                uri: `http://${r.backendRef.name}${path}`,
                httpUpstreamType: { case: "cluster", value: c.cluster },
                timeout: durationFromMs(JWKS_FETCH_TIMEOUT_MS),
              },
              cacheDuration: durationFromMs(parseDurationMs(r.cacheDuration ?? "5m") ?? DEFAULT_CACHE_MS),
              // Fetched when the listener starts and refreshed every cacheDuration, for all workers at once.
              asyncFetch: {},
            },
          };
        } else if (usableJwks(p.jwks.inline ?? "")) {
          jwks = { case: "localJwks", value: { specifier: { case: "inlineString", value: p.jwks.inline ?? "" } } };
        } else {
          // Envoy refuses a whole listener over a key set without a usable key; instead this provider verifies
          // nothing (keys from a cluster with no endpoints), so Strict answers 401, and the status says why.
          ctx.note(
            f.from,
            `jwtAuthentication.providers[${i}].jwks.inline`,
            "is not a JSON Web Key Set with a usable public key; no token of this provider verifies",
          );
          const c = serviceCluster(route, `${f.path}.providers[${i}].jwks.inline`, f.from, undefined, false);
          if (c.extra !== undefined) clusters.push(c.extra);
          jwks = {
            case: "remoteJwks",
            value: {
              httpUri: {
                uri: "http://invalid-inline-jwks/",
                httpUpstreamType: { case: "cluster", value: c.cluster },
                timeout: durationFromMs(JWKS_FETCH_TIMEOUT_MS),
              },
              cacheDuration: durationFromMs(DEFAULT_CACHE_MS),
            },
          };
        }
        const loc = jwt.location;
        // An expression's token is set by Sluice in a header of its own just before this filter (context.ts).
        const header =
          loc === undefined
            ? { name: "Authorization", prefix: "Bearer" }
            : loc.expression !== undefined
              ? { name: JWT_EXPRESSION_HEADER }
              : loc.header;
        providers[`p${i}`] = {
          issuer: p.issuer,
          audiences: [...(p.audiences ?? [])],
          jwksSourceSpecifier: jwks,
          // The spec requires `exp`; Envoy then rejects tokens without one.
          requireExpiration: true,
          // The spec does not say the token is removed from the request, so it is forwarded as received; Sluice's
          // own header for an expression's token is not (removed once it verifies).
          forward: loc?.expression === undefined,
          ...(header !== undefined
            ? {
                fromHeaders: [
                  { name: header.name, valuePrefix: header.prefix !== undefined ? `${header.prefix} ` : "" },
                ],
              }
            : {}),
          fromParams: loc?.queryParameter !== undefined ? [loc.queryParameter.name] : [],
          fromCookies: loc?.cookie !== undefined ? [loc.cookie.name] : [],
          payloadInMetadata: JWT_PAYLOAD_KEY,
          // Read by the `kid` check below.
          headerInMetadata: JWT_HEADER_KEY,
          // Lets the listener turn jwt_authn's 403 for a wrong audience into the spec's 401 (xds/listener.ts).
          failedStatusInMetadata: JWT_FAILURE_KEY,
        };
      });
      const locExpr = jwt.location?.expression;
      const compiledLoc = locExpr === undefined ? undefined : compileExpression(locExpr);
      if (compiledLoc !== undefined && "errors" in compiledLoc) {
        ctx.note(
          f.from,
          "jwtAuthentication.location.expression",
          `does not compile (${compiledLoc.errors.map((e) => e.message).join("; ")}); no token is read, so no request verifies`,
          "NeverMatches",
        );
      }
      if (jwt.mcp !== undefined && !servesMcpOAuth(route)) {
        // Served by Sluice's MCP service (translate/mcp/oauth-routes.ts), so only on routes to MCP backends.
        ctx.note(
          f.from,
          "jwtAuthentication.mcp",
          "the MCP OAuth endpoints are served on routes to an MCP GwBackend only; this route has none",
        );
      }
      const names = Object.keys(providers);
      const verified: MessageInitShape<typeof JwtRequirementSchema>[] = names.map((n) => ({
        requiresType: { case: "providerName", value: n },
      }));
      const mode = jwt.mode ?? "Strict";
      // Optional: a present token must verify. Permissive: never rejects, but claims of a valid token are kept.
      if (mode === "Optional") verified.push({ requiresType: { case: "allowMissing", value: {} } });
      if (mode === "Permissive") verified.push({ requiresType: { case: "allowMissingOrFailed", value: {} } });
      const requirement: MessageInitShape<typeof JwtRequirementSchema> =
        verified.length === 1 && verified[0] !== undefined
          ? verified[0]
          : { requiresType: { case: "requiresAny", value: { requirements: verified } } };
      const config = create(JwtAuthenticationSchema, { providers, requirementMap: { [REQUIREMENT]: requirement } });
      filters.push({
        name: instanceName(FILTER, toBinary(JwtAuthenticationSchema, config)),
        order: phaseOrder(FilterOrder.jwtAuthn, f.phase),
        config: anyPack(JwtAuthenticationSchema, config),
        perRoute: anyPack(
          PerRouteConfigSchema,
          create(PerRouteConfigSchema, { requirementSpecifier: { case: "requirementName", value: REQUIREMENT } }),
        ),
      });
      // Tokens must carry `kid` (spec, JWT rule 1). Envoy verifies a token without one against every published key,
      // so a native RBAC filter right after jwt_authn denies a verified token whose header has no `kid`. Permissive
      // never rejects, so it is left out there.
      if (mode !== "Permissive") {
        filters.push({
          name: f.phase === "preRouting" ? `${JWT_KID_FILTER}/pre` : JWT_KID_FILTER,
          order: phaseOrder(FilterOrder.jwtKidRequired, f.phase),
          config: KID_RBAC,
          perRoute: KID_RBAC_PER_ROUTE,
        });
      }
    }
    return filters.length === 0 ? undefined : { filters, clusters };
  },
};
