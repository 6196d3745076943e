// `sluice certificate --xds-ca <dir> --gateway <ns>/<name> --out <dir>`: issues a Gateway's client certificate from
// the CA `sluice serve --xds-ca <dir>` uses, for an Envoy started with `sluice bootstrap --tls-*`.

import { parseArgs } from "node:util";
import type { CommandIO } from "./io.js";
import { loadOrCreateCa, writeGatewayCertificate } from "./xds-tls.js";

export async function runCertificate(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      "xds-ca": { type: "string" },
      gateway: { type: "string" },
      out: { type: "string" },
    },
  });
  const gateway = values.gateway;
  if (values["xds-ca"] === undefined || values.out === undefined || gateway === undefined) {
    io.stderr("sluice certificate: --xds-ca <dir>, --gateway <namespace>/<name> and --out <dir> are required\n");
    return 2;
  }
  if (!/^[A-Za-z0-9._-]+\/[A-Za-z0-9._-]+$/.test(gateway)) {
    io.stderr(
      `sluice certificate: --gateway must be <namespace>/<name> (letters, digits, ".", "-", "_"), got "${gateway}"\n`,
    );
    return 2;
  }
  const { ca, created } = await loadOrCreateCa(values["xds-ca"]);
  if (created) io.stderr(`sluice certificate: created a CA in ${values["xds-ca"]}\n`);
  const files = await writeGatewayCertificate(ca, gateway, values.out);
  io.stdout(
    `sluice bootstrap --gateway ${gateway} --tls-cert ${files.certFile} --tls-key ${files.keyFile} --tls-ca ${files.caFile}\n`,
  );
  return 0;
}
