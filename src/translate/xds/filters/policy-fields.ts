// Shared by the traffic filter builders: the fields of both traffic phases, instance names, clusters of policy
// backendRefs, and the `conditional` form.

import { createHash } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Cluster } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import type { GrpcServiceSchema } from "../../../gen/envoy/config/core/v3/grpc_service_pb.js";
import { durationFromMs } from "../../duration.js";
import type { PolicySourceIR, RouteIR } from "../../ir.js";
import { filterInstanceName, unresolvedClusterName } from "../../names.js";
import { buildCluster } from "../cluster.js";
import type { BuildContext } from "./types.js";

export type Phase = "preRouting" | "traffic";

/** One traffic field of a route in one phase. */
export interface PhaseField<T> {
  readonly value: T;
  readonly from: PolicySourceIR;
  readonly phase: Phase;
  /** `traffic.cors` or `preRouting.cors`: the key of the field's backendRefs in `RoutePolicyIR.refs`. */
  readonly path: string;
}

/**
 * The field `name` in the PreRouting then the PostRouting policy of a route. The two phases never merge, so both
 * run, PreRouting first; the value is the validated JSON, typed by its schema in src/api.
 */
export function phaseFields<T>(route: RouteIR, name: string): PhaseField<T>[] {
  const out: PhaseField<T>[] = [];
  for (const phase of ["preRouting", "traffic"] as const) {
    const f = route.policy?.[phase]?.[name];
    if (f === undefined || "combined" in f) continue;
    out.push({ value: f.value as T, from: f.from, phase, path: `${phase}.${name}` });
  }
  return out;
}

/** PreRouting filters run before every PostRouting filter: they get the whole order range below. */
export function phaseOrder(order: number, phase: Phase): number {
  return phase === "preRouting" ? order - 10_000 : order;
}

/** Canonical JSON (sorted keys), so equal configs give equal instance names whatever the key order. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (typeof v === "object" && v !== null) {
    const entries = Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

/**
 * A filter whose listener-level config depends on the policy (providers, service clusters) gets one instance per
 * distinct config: `<filter>/<hash of config>`. Routes with the same config share an instance.
 */
export function instanceName(filter: string, config: unknown): string {
  const bytes = config instanceof Uint8Array ? config : canonical(config);
  return filterInstanceName(filter, createHash("sha256").update(bytes).digest("hex").slice(0, 10));
}

export interface ServiceCluster {
  readonly cluster: string;
  /** An empty cluster standing for a ref that does not resolve, so Envoy accepts the config and calls fail. */
  readonly extra?: Cluster;
}

/**
 * The cluster of the backendRef at `refPath` (e.g. `traffic.extAuth.backendRef`). A ref that does not resolve gets
 * an endpoint-less cluster: the filter stays in place and its failure mode decides, and the status says why
 * (`ctx` undefined: the caller reports it).
 */
export function serviceCluster(
  route: RouteIR,
  refPath: string,
  from: PolicySourceIR,
  ctx: BuildContext | undefined,
  http2: boolean,
): ServiceCluster {
  const ref = route.policy?.refs?.[refPath];
  if (ref !== undefined && "cluster" in ref) return { cluster: ref.cluster };
  const field = refPath.replace(/^(preRouting|traffic)\./, "");
  ctx?.note(
    from,
    field,
    `${ref?.error ?? "not resolved"}; calls to this service fail until it resolves (the failure mode applies)`,
  );
  const name = unresolvedClusterName(refPath);
  return { cluster: name, extra: buildCluster({ kind: "static", name, endpoints: [], http2 }) };
}

/**
 * `authority`: the :authority of the calls. Envoy defaults it to the cluster name, which contains `/` and is then
 * refused by HTTP/2 codecs, so it is the backend's name.
 */
export function grpcService(
  cluster: string,
  authority: string,
  timeoutMs = 10_000,
): MessageInitShape<typeof GrpcServiceSchema> {
  return {
    targetSpecifier: { case: "envoyGrpc", value: { clusterName: cluster, authority } },
    timeout: durationFromMs(timeoutMs),
  };
}

interface Conditional<P> {
  readonly conditional?: readonly { readonly condition?: string; readonly policy: P }[];
}

/**
 * The `conditional` (OrConditional) form. A list whose first entry has no condition (or `true`) always runs that
 * entry, which Envoy does natively. Conditions that need per-request CEL to pick an entry are for the Sluice ext_proc
 * service; until it does, nothing is applied and the status says so.
 */
export function unconditional<P>(
  value: P & Conditional<P>,
  from: PolicySourceIR,
  field: string,
  ctx: BuildContext,
): { readonly policy: P; readonly path: string } | undefined {
  const list = value.conditional;
  if (list === undefined) return { policy: value, path: "" };
  const first = list[0];
  if (first !== undefined && (first.condition === undefined || first.condition.trim() === "true")) {
    return { policy: first.policy, path: ".conditional[0].policy" };
  }
  ctx.note(
    from,
    `${field}.conditional`,
    "choosing an entry by a per-request CEL condition needs the Sluice ext_proc service, which does not do it yet; " +
      "no entry is applied",
  );
  return undefined;
}

// In a leaf module, so that what needs it (ext-authz-options.ts) is not in an import cycle through this one.
export { celStringLiteral } from "./cel-literal.js";
