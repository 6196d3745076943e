// Minimal jwt_authn builder (inline JWKS only) so the authorization e2e tests can run on this branch. Issue 5 owns
// the real JWT authentication filter; the integrator keeps theirs and drops this file. The contract both share:
// the verified payload goes to dynamic metadata `envoy.filters.http.jwt_authn` / `jwt_payload` (src/cel/rbac.ts).

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { JWT_PAYLOAD_KEY } from "../../../cel/rbac.js";
import {
  JwtAuthenticationSchema,
  type JwtProviderSchema,
  type JwtRequirementSchema,
  PerRouteConfigSchema,
} from "../../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb.js";
import { canonicalJson, policyId } from "../../authz/policy-table.js";
import { FilterOrder, type HttpFilterBuilder, trafficField } from "./types.js";

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export const jwtAuthnBuilder: HttpFilterBuilder = {
  id: "jwt-authn",
  schemas: [JwtAuthenticationSchema, PerRouteConfigSchema],
  forRoute(route, ctx) {
    const field = trafficField(route, "jwtAuthentication");
    if (field === undefined || !isRecord(field.value)) return undefined;
    const spec = field.value;
    const providers: Record<string, MessageInitShape<typeof JwtProviderSchema>> = {};
    const loc = isRecord(spec["location"]) ? spec["location"] : undefined;
    const header = isRecord(loc?.["header"]) ? loc["header"] : undefined;
    const query = isRecord(loc?.["queryParameter"]) ? loc["queryParameter"] : undefined;
    const cookie = isRecord(loc?.["cookie"]) ? loc["cookie"] : undefined;
    const list = Array.isArray(spec["providers"]) ? spec["providers"] : [];
    list.forEach((p, i) => {
      if (!isRecord(p)) return;
      const jwks = isRecord(p["jwks"]) ? p["jwks"] : {};
      if (typeof jwks["inline"] !== "string") {
        ctx.note(field.from, "traffic.jwtAuthentication", `providers[${i}].jwks.remote is not supported yet`);
        return;
      }
      providers[`p${i}`] = {
        issuer: String(p["issuer"] ?? ""),
        audiences: Array.isArray(p["audiences"]) ? p["audiences"].map(String) : [],
        jwksSourceSpecifier: {
          case: "localJwks",
          value: { specifier: { case: "inlineString", value: jwks["inline"] } },
        },
        payloadInMetadata: JWT_PAYLOAD_KEY,
        ...(header !== undefined
          ? {
              fromHeaders: [
                {
                  name: String(header["name"]),
                  valuePrefix: typeof header["prefix"] === "string" ? `${header["prefix"]} ` : "",
                },
              ],
            }
          : {}),
        ...(query !== undefined ? { fromParams: [String(query["name"])] } : {}),
        ...(cookie !== undefined ? { fromCookies: [String(cookie["name"])] } : {}),
      } as MessageInitShape<typeof JwtProviderSchema>;
    });
    const names = Object.keys(providers);
    if (names.length === 0) return undefined;
    const one: MessageInitShape<typeof JwtRequirementSchema>[] = names.map((n) => ({
      requiresType: { case: "providerName", value: n },
    }));
    const mode = spec["mode"] ?? "Strict";
    const any = (extra: MessageInitShape<typeof JwtRequirementSchema>[]) =>
      ({ requiresType: { case: "requiresAny", value: { requirements: [...one, ...extra] } } }) as MessageInitShape<
        typeof JwtRequirementSchema
      >;
    const requirement: MessageInitShape<typeof JwtRequirementSchema> =
      mode === "Permissive"
        ? { requiresType: { case: "allowMissingOrFailed", value: {} } }
        : mode === "Optional"
          ? any([{ requiresType: { case: "allowMissing", value: {} } }])
          : names.length === 1
            ? one[0]!
            : any([]);
    // One jwt_authn instance per distinct configuration: filters are shared by name, and the first config wins.
    const name = `sluice.jwt_authn.${policyId(canonicalJson({ providers, mode })).slice(2, 14)}`;
    const config = create(JwtAuthenticationSchema, {
      providers: providers as never,
      requirementMap: { route: requirement as never },
    });
    return {
      filters: [
        {
          name,
          order: FilterOrder.jwtAuthn,
          config: anyPack(JwtAuthenticationSchema, config),
          perRoute: anyPack(
            PerRouteConfigSchema,
            create(PerRouteConfigSchema, { requirementSpecifier: { case: "requirementName", value: "route" } }),
          ),
        },
      ],
    };
  },
};
