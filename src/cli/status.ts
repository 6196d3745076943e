// `sluice status -f <file|dir>`: the status Sluice computes for every resource (file mode has no API server to
// write it to), and the problems found while loading. With `--admin <url>` it also shows what the running Sluice
// server knows of each connected Envoy (versions ACKed, NACKs with Envoy's message).

import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { formatProblem } from "../sources/file-source.js";
import type { CommandIO } from "./io.js";
import { loadAndTranslate, loadCluster } from "./load.js";

/** Kinds whose status Sluice writes. */
const STATUS_KINDS = new Set([
  "GatewayClass",
  "Gateway",
  "HTTPRoute",
  "GRPCRoute",
  "ListenerSet",
  "XListenerSet",
  "GwPolicy",
  "GwBackend",
  "GwModel",
]);

/** Whether a status holds a condition that is not fine: one False, or a Warning that is True. */
function hasProblem(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasProblem);
  if (typeof v !== "object" || v === null) return false;
  const o = v as Record<string, unknown>;
  if (typeof o["type"] === "string" && typeof o["status"] === "string")
    return o["status"] === "False" || (o["type"] === "Warning" && o["status"] === "True");
  return Object.values(o).some(hasProblem);
}

export async function runStatus(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      file: { type: "string", short: "f", multiple: true },
      kubeconfig: { type: "string" },
      admin: { type: "string" },
      output: { type: "string", short: "o", default: "yaml" },
    },
  });
  const doc: Record<string, unknown> = {};
  let failed = false;
  if (values.file?.length) {
    const { load, result } = await loadAndTranslate(values.file);
    doc["problems"] = load.problems.map(formatProblem);
    doc["resources"] = result.statuses.map((s) => ({
      kind: s.kind,
      namespace: s.namespace,
      name: s.name,
      status: s.status,
    }));
    failed = load.problems.some((p) => p.severity === "error");
  }
  if (values.kubeconfig !== undefined) {
    // What the controller wrote: the status stored in the cluster, of the kinds that have one, problems first.
    let objects: { kind: string; namespace?: string; name: string; status: unknown }[] = [];
    const load = await loadCluster(
      values.kubeconfig,
      (l) => io.stderr(`${l}\n`),
      (source) => {
        objects = [...source.reflectors.values()]
          .filter((r) => STATUS_KINDS.has(r.kind.kind))
          .flatMap((r) =>
            [...r.objects.values()].map((o) => ({
              kind: r.kind.kind,
              ...(o.metadata.namespace !== undefined ? { namespace: o.metadata.namespace } : {}),
              name: o.metadata.name,
              status: o["status"] ?? null,
            })),
          );
      },
    );
    doc["problems"] = load.problems.map(formatProblem);
    doc["resources"] = objects.sort((a, b) => Number(hasProblem(b.status)) - Number(hasProblem(a.status)));
    failed = load.problems.some((p) => p.severity === "error");
  }
  if (values.admin !== undefined) {
    try {
      const res = await fetch(new URL("/status", values.admin));
      doc["xds"] = await res.json();
    } catch (e) {
      io.stderr(`sluice status: cannot reach ${values.admin}: ${(e as Error).message}\n`);
      return 1;
    }
  }
  if (Object.keys(doc).length === 0) {
    io.stderr("sluice status: give -f <file|dir> or --kubeconfig <file>, and/or --admin <url of a running sluice>\n");
    return 2;
  }
  io.stdout(values.output === "json" ? `${JSON.stringify(doc, null, 2)}\n` : stringify(doc));
  return failed ? 1 : 0;
}
