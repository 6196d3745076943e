#!/usr/bin/env node
// The `sluice` command. Runs the compiled CLI; `npm run build` (or `npm test`) compiles it.
import { existsSync } from "node:fs";

const entry = new URL("../dist/src/cli/main.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write("sluice: not built yet; run `npm run build` (or `npm run setup && npm run build`) first\n");
  process.exit(2);
}
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
