// PreRouting `headerModifiers.request` → the HttpConnectionManager's early header mutation, which runs before Envoy
// picks a route, so a PreRouting policy can steer routing (spec: PreRouting "is for policies that influence routing").
// One HCM serves one route configuration; the mutation is used when every route of that configuration carries the
// same PreRouting request modifiers (a Gateway-level policy, or every listener on the port). Otherwise the modifiers
// stay on each route (applied after route selection) and the policy's status says so.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { Traffic } from "../../api/policy.js";
import type { Static } from "../../api/schema-kit.js";
import type { HeaderMutationSchema as RuleSchema } from "../../gen/envoy/config/common/mutation_rules/v3/mutation_rules_pb.js";
import { HeaderValueOption_HeaderAppendAction } from "../../gen/envoy/config/core/v3/base_pb.js";
import type { TypedExtensionConfigSchema } from "../../gen/envoy/config/core/v3/extension_pb.js";
import { HeaderMutationSchema } from "../../gen/envoy/extensions/http/early_header_mutation/header_mutation/v3/header_mutation_pb.js";
import type { PolicySourceIR, RouteConfigIR } from "../ir.js";

type HeaderFilter = NonNullable<NonNullable<Static<typeof Traffic>["headerModifiers"]>["request"]>;

export const EARLY_HEADER_MUTATION_SCHEMAS = [HeaderMutationSchema] as const;

export interface EarlyRequestHeaders {
  readonly value: HeaderFilter;
  readonly from: PolicySourceIR;
}

/** The PreRouting request header modifiers shared by every route of `rc`, if they are shared and present. */
export function earlyRequestHeaders(rc: RouteConfigIR): EarlyRequestHeaders | undefined {
  let first: EarlyRequestHeaders | undefined;
  let key: string | undefined;
  for (const vh of rc.virtualHosts) {
    for (const r of vh.routes) {
      const f = r.policy?.preRouting?.["headerModifiers"];
      if (f === undefined || "combined" in f) return undefined;
      const request = (f.value as { request?: HeaderFilter }).request;
      if (request === undefined) return undefined;
      const k = `${f.from.kind}/${f.from.name}|${JSON.stringify(request)}`;
      if (key === undefined) {
        key = k;
        first = { value: request, from: f.from };
      } else if (k !== key) {
        return undefined;
      }
    }
  }
  return first;
}

export function earlyHeaderMutationExtension(h: HeaderFilter): MessageInitShape<typeof TypedExtensionConfigSchema> {
  const append = (name: string, value: string, action: HeaderValueOption_HeaderAppendAction) => ({
    action: { case: "append" as const, value: { header: { key: name, value }, appendAction: action } },
  });
  const mutations: MessageInitShape<typeof RuleSchema>[] = [
    ...(h.remove ?? []).map((name) => ({ action: { case: "remove" as const, value: name } })),
    ...(h.set ?? []).map((x) =>
      append(x.name, x.value, HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD),
    ),
    ...(h.add ?? []).map((x) => append(x.name, x.value, HeaderValueOption_HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD)),
  ];
  return {
    name: "envoy.http.early_header_mutation.header_mutation",
    typedConfig: anyPack(HeaderMutationSchema, create(HeaderMutationSchema, { mutations })),
  };
}
