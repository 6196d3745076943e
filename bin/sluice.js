#!/usr/bin/env -S node --min-semi-space-size=16 --max-semi-space-size=16
// The `sluice` command. Runs the compiled CLI; `npm run build` (or `npm test`) compiles it. The Node flags on the first
// line (a fixed young generation: docs/faults.md#memory) are also in deploy/Containerfile's ENTRYPOINT and
// scripts/quickstart.sh; test/unit/node-flags.test.ts keeps them equal.
import { existsSync } from "node:fs";
import module from "node:module";

// V8's compiled code of Sluice's modules kept on disk (Node's own cache, in the OS temporary directory; keyed by the
// Node version and each file's content), so a start compiles only what changed: about a fifth of a start's CPU.
// NODE_DISABLE_COMPILE_CACHE=1 turns it off; where the directory cannot be written, Node runs without it.
// (`module.enableCompileCache` is Node 22.1 and later; the package asks for Node 22.)
module.enableCompileCache?.();

const entry = new URL("../dist/src/cli/main.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write("sluice: not built yet; run `npm run build` (or `npm run setup && npm run build`) first\n");
  process.exit(2);
}
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
