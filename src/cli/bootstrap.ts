// `sluice bootstrap --gateway ns/name`: prints the Envoy bootstrap for running Envoy yourself against `sluice serve`.

import { parseArgs } from "node:util";
import { deltaXds, renderBootstrap, XDS_MODE_OPTIONS } from "./envoy.js";
import type { CommandIO } from "./io.js";
import { parsePort } from "./serve.js";

export async function runBootstrap(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      gateway: { type: "string" },
      "node-id": { type: "string" },
      "xds-host": { type: "string", default: "127.0.0.1" },
      "xds-port": { type: "string", default: "18000" },
      "authz-port": { type: "string", default: "18002" },
      "envoy-admin-port": { type: "string", default: "19000" },
      ...XDS_MODE_OPTIONS,
    },
  });
  if (values.gateway === undefined || !/^[^/]+\/[^/]+$/.test(values.gateway)) {
    io.stderr("sluice bootstrap: --gateway <namespace>/<name> is required\n");
    return 2;
  }
  const delta = deltaXds(values, "sluice bootstrap", io);
  if (delta === undefined) return 2;
  io.stdout(
    renderBootstrap({
      nodeId: values["node-id"] ?? `envoy-${values.gateway.replace("/", "-")}`,
      gateway: values.gateway,
      adminPort: parsePort("envoy-admin-port", values["envoy-admin-port"]),
      xdsHost: values["xds-host"],
      xdsPort: parsePort("xds-port", values["xds-port"]),
      authzPort: parsePort("authz-port", values["authz-port"]),
      delta,
    }),
  );
  return 0;
}
