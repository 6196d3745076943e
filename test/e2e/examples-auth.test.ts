// examples/api-keys and examples/jwt-cel run as their READMEs say: `sluice run -f` on the directory, the demo upstream
// (examples/quickstart/upstream.mjs) as a process, and every curl line of the README through the Envoy sluice started.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { projectRoot } from "../../src/cli/paths.js";
import { freePort, waitFor } from "../helpers/net.js";
import { runExample, runReadme } from "./examples-run.js";

async function demoUpstream(port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [join(projectRoot(), "examples", "quickstart", "upstream.mjs")], {
    env: { ...process.env, PORT: String(port) },
    stdio: "ignore",
  });
  await waitFor("the demo upstream", async () => ((await fetch(`http://127.0.0.1:${port}/`)).ok ? true : undefined));
  return child;
}

for (const name of ["api-keys", "jwt-cel"]) {
  test(`examples/${name}: every call of its README answers as the README says`, async (t) => {
    const ports = new Map([
      [8080, await freePort()],
      [8081, await freePort()],
    ]);
    const upstream = await demoUpstream(ports.get(8081) ?? 0);
    t.after(() => upstream.kill());
    const running = await runExample(name, ports);
    t.after(() => running.stop());
    const calls = await runReadme(name, running, ports);
    assert.ok(calls >= 5, `only ${calls} calls`);
  });
}
