// Envoy NACKs a configuration it cannot accept (here a route regex RE2 rejects, which JavaScript accepts): Sluice
// records the NACK with Envoy's own message (status, metrics, `sluice status --admin`), Envoy keeps serving its last
// good configuration, and the next good change is applied.

import assert from "node:assert/strict";
import { after, test } from "node:test";
import { main } from "../../src/cli/main.js";
import { gatewayYaml } from "../helpers/gateway.js";
import { type EchoBody, freePort, request, startEchoUpstream, waitFor } from "../helpers/net.js";
import { startSluice, startTestEnvoy, tempConfigDir } from "../helpers/processes.js";
import { sampleSum, scrape } from "../helpers/prom-text.js";

const cfg = tempConfigDir();
after(() => cfg.cleanup());

function yaml(port: number, upstreamPort: number, extraMatch: string): string {
  return `${gatewayYaml(port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /ok } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: up }]
    - matches: [${extraMatch}]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: up }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: up, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${upstreamPort} } }
`;
}

test("a NACK is recorded with Envoy's message and the last good config keeps serving", async () => {
  const upstream = await startEchoUpstream("up");
  const port = await freePort();
  cfg.write("all.yaml", yaml(port, upstream.port, "{ path: { type: PathPrefix, value: /second } }"));
  const sluice = await startSluice("serve", cfg.dir);
  const envoy = await startTestEnvoy(sluice);
  try {
    await waitFor("the good config", async () => ((await request(port, "/second")).status === 200 ? true : undefined));
    // Lookahead is valid JavaScript but not RE2: Envoy rejects the RouteConfiguration.
    cfg.write("all.yaml", yaml(port, upstream.port, '{ path: { type: RegularExpression, value: "^/(?=x)y" } }'));
    const nack = await waitFor("the NACK", async () => {
      const s = (await (await fetch(`http://127.0.0.1:${sluice.adminPort}/status/xds`)).json()) as {
        streams: { types: { typeUrl: string; lastNack?: { message: string } }[] }[];
      };
      return s.streams.flatMap((st) => st.types).find((t) => t.lastNack !== undefined);
    });
    assert.match(nack.lastNack?.message ?? "", /regex|RE2|invalid/i);
    const refused = nack.typeUrl.slice(nack.typeUrl.lastIndexOf(".") + 1);
    // Envoy kept its last good routes.
    assert.equal((JSON.parse((await request(port, "/second")).body) as EchoBody).upstream, "up");
    assert.equal((await request(port, "/ok")).status, 200);
    // Counted for this Envoy and the type it refused, and in the total (read with a Prometheus text parser).
    const metrics = await scrape(sluice.adminPort);
    assert.ok(sampleSum(metrics, "sluice_xds_nacks_total") >= 1, "the total counts the NACK");
    const perEnvoy = metrics.get("sluice_xds_envoy_nacks_total")?.samples.filter((x) => x.value > 0) ?? [];
    assert.ok(
      perEnvoy.some((x) => x.labels["type"] === refused && (x.labels["node"] ?? "") !== ""),
      `a per-Envoy NACK of the ${refused} (the routes' type): ${JSON.stringify(perEnvoy)}`,
    );
    assert.ok(
      perEnvoy.every((x) => x.labels["type"] === refused),
      `no other type refused: ${JSON.stringify(perEnvoy)}`,
    );
    let out = "";
    const code = await main(["status", "--admin", `http://127.0.0.1:${sluice.adminPort}`], {
      stdout: (t) => (out += t),
      stderr: () => {},
    });
    assert.equal(code, 0);
    assert.match(out, /lastNack/);
    // A good change afterwards is applied.
    cfg.write("all.yaml", yaml(port, upstream.port, "{ path: { type: PathPrefix, value: /third } }"));
    await waitFor("the next good config", async () =>
      (await request(port, "/third")).status === 200 ? true : undefined,
    );
    assert.equal((await request(port, "/second")).status, 404);
  } finally {
    await envoy.stop();
    await sluice.stop();
    await upstream.close();
  }
});
