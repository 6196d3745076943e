// Translating a policy golden input into the document stored as golden output: GwPolicy status and the effective
// policies (per Gateway port and per route rule through each listener, with what did not apply and why).

import { stringify } from "yaml";
import { loadAndTranslate } from "../../src/cli/load.js";
import { formatProblem } from "../../src/sources/file-source.js";

export async function policyToGoldenYaml(file: string, relativeTo: string): Promise<string> {
  const { load, result } = await loadAndTranslate([file]);
  const doc = {
    problems: load.problems.map((p) => formatProblem({ ...p, file: p.file.slice(relativeTo.length + 1) })),
    policyStatuses: result.statuses.filter((s) => s.kind === "GwPolicy"),
    // Read from the IR, so the goldens show what the xDS builders receive.
    listeners: result.gateways.flatMap((g) =>
      g.ir.listeners.filter((l) => l.policy !== undefined).map((l) => ({ listener: l.name, policy: l.policy })),
    ),
    routes: result.gateways.flatMap((g) =>
      g.ir.routeConfigs.flatMap((rc) =>
        rc.virtualHosts.flatMap((vh) =>
          vh.routes
            .filter((r) => r.policy !== undefined)
            .map((r) => ({ virtualHost: vh.name, route: r.name, policy: r.policy })),
        ),
      ),
    ),
    notApplied: [
      ...result.policies.listeners
        .filter((s) => s.notApplied.length > 0)
        .map((s) => ({ gateway: s.gateway, port: s.port, notApplied: s.notApplied })),
      ...result.policies.routes
        .filter((s) => s.notApplied.length > 0)
        .map((s) => ({
          gateway: s.gateway,
          listener: s.listener,
          route: s.route,
          rule: s.rule,
          notApplied: s.notApplied,
        })),
    ],
  };
  return stringify(doc, { aliasDuplicateObjects: false, lineWidth: 0 });
}
