// `sluice ratelimit-config -f <file|dir> --limit <domain>/<entry>[/<entry>...]=<n>/<unit> ... [--out <dir>]`: writes
// envoyproxy/ratelimit's configuration (one YAML file per domain) for the descriptors the GwPolicies'
// `traffic.rateLimit.global` make Envoy send, with the numbers given by --limit. Without --out the files are printed,
// separated by `---`. Warnings (descriptors without a limit, limits no policy uses) go to stderr.

import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { GwPolicy } from "../api/sluice.js";
import { FileSource, formatProblem } from "../sources/file-source.js";
import { domainFileName, parseLimitArg, rateLimitServiceConfig } from "../translate/ratelimit-config.js";
import type { CommandIO } from "./io.js";

export const RATELIMIT_CONFIG_OPTIONS = {
  file: { type: "string", short: "f", multiple: true },
  limit: { type: "string", multiple: true },
  out: { type: "string" },
} as const;

export async function runRateLimitConfig(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({ args: argv, options: RATELIMIT_CONFIG_OPTIONS });
  if (!values.file?.length) {
    io.stderr("sluice ratelimit-config: -f <file|dir> is required\n");
    return 2;
  }
  const limits = (values.limit ?? []).map(parseLimitArg);
  const load = await new FileSource(values.file).load();
  for (const p of load.problems) io.stderr(`${formatProblem(p)}\n`);
  const policies = load.resources.filter((r) => r.kind === "GwPolicy") as unknown as GwPolicy[];
  const { files, warnings } = rateLimitServiceConfig(policies, limits);
  for (const w of warnings) io.stderr(`warning: ${w}\n`);
  if (values.out === undefined) {
    io.stdout([...files.values()].join("---\n"));
  } else {
    mkdirSync(values.out, { recursive: true });
    for (const [domain, text] of files) {
      // Written whole then renamed, so a service watching the directory never reads half a file.
      // The temporary name starts with a dot: envoyproxy/ratelimit skips it with RUNTIME_IGNOREDOTFILES=true.
      const name = domainFileName(domain);
      writeFileSync(join(values.out, `.${name}.tmp`), text);
      renameSync(join(values.out, `.${name}.tmp`), join(values.out, name));
    }
  }
  return load.problems.some((p) => p.severity === "error") ? 1 : 0;
}
