// `frontend.networkAuthorization` → network filters placed before the HttpConnectionManager of every filter chain of
// the Gateway port: native network RBAC when the rules compile to it, else a network ext_authz call to Sluice. The
// network ext_authz has no context extensions, so the policy-table id travels as gRPC metadata (`x-sluice-policy`).

import { create } from "@bufbuild/protobuf";
import { type Any, anyPack } from "@bufbuild/protobuf/wkt";
import { POLICY_METADATA_KEY } from "../../extauthz/server.js";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import { ExtAuthzSchema } from "../../gen/envoy/extensions/filters/network/ext_authz/v3/ext_authz_pb.js";
import { RBACSchema } from "../../gen/envoy/extensions/filters/network/rbac/v3/rbac_pb.js";
import { planNetworkAuthz } from "../authz/plan.js";
import type { ListenerIR } from "../ir.js";
import { SLUICE_AUTHZ_CLUSTER } from "../names.js";
import type { BuildContext } from "./filters/types.js";

export interface NetworkFilter {
  readonly name: string;
  readonly configType: { readonly case: "typedConfig"; readonly value: Any };
}

export const NETWORK_AUTHZ_SCHEMAS = [ExtAuthzSchema, RBACSchema] as const;

export function buildNetworkAuthorization(l: ListenerIR, ctx: BuildContext): NetworkFilter[] {
  if (ctx.authz === undefined) return [];
  const plan = planNetworkAuthz(l.policy?.frontend, ctx.authz);
  if (plan === undefined) return [];
  if (plan.rbac !== undefined) {
    return plan.rbac.map(({ kind, config }) => ({
      name: `sluice.network_rbac.${kind}`,
      configType: {
        case: "typedConfig",
        value: anyPack(RBACSchema, create(RBACSchema, { rules: config, statPrefix: `sluice_network_${kind}_` })),
      },
    }));
  }
  if (plan.policyId === undefined) return [];
  return [
    {
      name: "sluice.network_ext_authz",
      configType: {
        case: "typedConfig",
        value: anyPack(
          ExtAuthzSchema,
          create(ExtAuthzSchema, {
            statPrefix: "sluice_network_ext_authz",
            grpcService: {
              targetSpecifier: { case: "envoyGrpc", value: { clusterName: SLUICE_AUTHZ_CLUSTER } },
              timeout: { seconds: 2n },
              initialMetadata: [{ key: POLICY_METADATA_KEY, value: plan.policyId }],
            },
            failureModeAllow: false,
            transportApiVersion: ApiVersion.V3,
          }),
        ),
      },
    },
  ];
}
