// `sluice run` on the quickstart files (ports moved to free ones): it starts Envoy itself with the bootstrap from
// deploy/envoy/, and requests are answered by the demo upstream through Envoy.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { projectRoot } from "../../src/cli/paths.js";
import { freePort, request, startEchoUpstream, waitFor } from "../helpers/net.js";
import { startSluice, tempConfigDir } from "../helpers/processes.js";

const cfg = tempConfigDir();
after(() => cfg.cleanup());

test("sluice run serves the quickstart through Envoy", async () => {
  const gatewayPort = await freePort();
  const upstream = await startEchoUpstream("demo");
  const yaml = readFileSync(join(projectRoot(), "examples", "quickstart", "gateway.yaml"), "utf8")
    .replace("port: 8080", `port: ${gatewayPort}`)
    .replace("port: 8081", `port: ${upstream.port}`);
  assert.notEqual(yaml.indexOf(`port: ${gatewayPort}`), -1);
  cfg.write("gateway.yaml", yaml);
  const sluice = await startSluice("run", cfg.dir);
  try {
    const r = await waitFor(
      "the quickstart route",
      async () => {
        const res = await request(gatewayPort, "/hello?x=1");
        return res.status === 200 ? res : undefined;
      },
      30_000,
    ).catch((e: unknown) => {
      // What sluice run and its Envoy said, so a failure here can be told from a slow start.
      throw new Error(`${(e as Error).message}\n--- sluice run output:\n${sluice.output.slice(-40).join("\n")}`);
    });
    assert.equal(r.headers["x-served-by"], "sluice-quickstart");
    assert.equal(JSON.parse(r.body).path, "/hello?x=1");
    assert.ok(
      sluice.output.some((l) => l.includes("started Envoy")),
      sluice.output.join("\n"),
    );
  } finally {
    await sluice.stop();
    await upstream.close();
  }
  // Envoy was a child of sluice run: stopping sluice stops it, and the port closes.
  await waitFor(
    "Envoy to stop",
    async () => {
      try {
        await request(gatewayPort, "/", { timeoutMs: 500 });
        return undefined;
      } catch {
        return true;
      }
    },
    10_000,
  );
});
