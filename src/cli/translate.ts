// `sluice translate -f <file|dir> [--gateway ns/name] [--output yaml|json] [--show-secrets]`: prints the xDS Sluice
// would serve. TLS private keys are redacted unless --show-secrets.

import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { formatProblem } from "../sources/file-source.js";
import { xdsToJson } from "../translate/xds/json.js";
import type { CommandIO } from "./io.js";
import { loadAndTranslate } from "./load.js";

export async function runTranslate(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      file: { type: "string", short: "f", multiple: true },
      gateway: { type: "string" },
      output: { type: "string", short: "o", default: "yaml" },
      "show-secrets": { type: "boolean", default: false },
    },
  });
  if (!values.file?.length) {
    io.stderr("sluice translate: -f <file|dir> is required\n");
    return 2;
  }
  const { load, result } = await loadAndTranslate(values.file);
  for (const p of load.problems) io.stderr(`${formatProblem(p)}\n`);
  const gateways = result.gateways
    .filter((g) => values.gateway === undefined || g.key === values.gateway)
    .map((g) => ({ gateway: g.key, ...xdsToJson(g.xds, { redactSecrets: !values["show-secrets"] }) }));
  const doc = { gateways };
  io.stdout(
    values.output === "json"
      ? `${JSON.stringify(doc, null, 2)}\n`
      : stringify(doc, { aliasDuplicateObjects: false, version: "1.1" }),
  );
  return load.problems.some((p) => p.severity === "error") ? 1 : 0;
}
