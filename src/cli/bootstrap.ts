// `sluice bootstrap --gateway ns/name`: prints the Envoy bootstrap for running Envoy yourself against `sluice serve`.

import { parseArgs } from "node:util";
import { type BootstrapTls, deltaXds, renderBootstrap, XDS_MODE_OPTIONS } from "./envoy.js";
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
      "mcp-port": { type: "string", default: "18003" },
      "envoy-admin-port": { type: "string", default: "19000" },
      // Mutual TLS to `sluice serve --xds-ca`: the Envoy's client certificate and key (`sluice certificate` issues
      // them), the CA of Sluice's serving certificate, and the name it must carry (default: --xds-host).
      "tls-cert": { type: "string" },
      "tls-key": { type: "string" },
      "tls-ca": { type: "string" },
      "tls-server-name": { type: "string" },
      ...XDS_MODE_OPTIONS,
    },
  });
  if (values.gateway === undefined || !/^[^/]+\/[^/]+$/.test(values.gateway)) {
    io.stderr("sluice bootstrap: --gateway <namespace>/<name> is required\n");
    return 2;
  }
  const delta = deltaXds(values, "sluice bootstrap", io);
  if (delta === undefined) return 2;
  const files = [values["tls-cert"], values["tls-key"], values["tls-ca"]];
  const given = files.filter((f) => f !== undefined).length;
  if (given !== 0 && given !== 3) {
    io.stderr("sluice bootstrap: --tls-cert, --tls-key and --tls-ca go together\n");
    return 2;
  }
  if (given === 0 && values["tls-server-name"] !== undefined) {
    io.stderr("sluice bootstrap: --tls-server-name needs --tls-cert, --tls-key and --tls-ca\n");
    return 2;
  }
  const [certFile, keyFile, caFile] = files;
  const tls: BootstrapTls | undefined =
    certFile !== undefined && keyFile !== undefined && caFile !== undefined
      ? { certFile, keyFile, caFile, serverName: values["tls-server-name"] ?? values["xds-host"] }
      : undefined;
  io.stdout(
    renderBootstrap({
      nodeId: values["node-id"] ?? `envoy-${values.gateway.replace("/", "-")}`,
      gateway: values.gateway,
      adminPort: parsePort("envoy-admin-port", values["envoy-admin-port"]),
      xdsHost: values["xds-host"],
      xdsPort: parsePort("xds-port", values["xds-port"]),
      authzPort: parsePort("authz-port", values["authz-port"]),
      mcpPort: parsePort("mcp-port", values["mcp-port"]),
      delta,
      ...(tls !== undefined ? { tls } : {}),
    }),
  );
  return 0;
}
