// One invalid resource among valid ones: it is reported (file, line, resource, field path) and left out, and
// everything else is served through Envoy. `sluice validate` reports the same problem and exits 1.

import assert from "node:assert/strict";
import { after, test } from "node:test";
import { main } from "../../src/cli/main.js";
import { gatewayYaml } from "../helpers/gateway.js";
import { type EchoBody, freePort, request, startEchoUpstream, waitFor } from "../helpers/net.js";
import { startSluice, startTestEnvoy, tempConfigDir } from "../helpers/processes.js";

const cfg = tempConfigDir();
after(() => cfg.cleanup());

test("an invalid resource is left out and the valid ones keep serving", async () => {
  const upstream = await startEchoUpstream("good");
  const port = await freePort();
  cfg.write(
    "good.yaml",
    `${gatewayYaml(port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: good, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /good } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: good }]
    - matches: [{ path: { type: PathPrefix, value: /broken } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: broken }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: good, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${upstream.port} } }
`,
  );
  cfg.write(
    "broken.yaml",
    `# A GwBackend must have exactly one variant.
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: broken, namespace: default }
spec:
  static: { host: 127.0.0.1, port: ${upstream.port} }
  dynamicForwardProxy: {}
`,
  );
  const sluice = await startSluice("serve", cfg.dir);
  const envoy = await startTestEnvoy(sluice);
  try {
    const ok = await waitFor("the valid route", async () => {
      const r = await request(port, "/good/x");
      return r.status === 200 ? r : undefined;
    });
    assert.equal((JSON.parse(ok.body) as EchoBody).upstream, "good");
    // The rule pointing at the invalid backend answers 500 (Gateway API: unresolvable backend), nothing else breaks.
    assert.equal((await request(port, "/broken")).status, 500);
    const status = (await sluice.status()) as { lastReload: { problems: string[] }; resources: unknown[] };
    const problem = status.lastReload.problems.find((p) => p.includes("GwBackend default/broken"));
    assert.ok(problem, JSON.stringify(status.lastReload.problems));
    assert.match(problem, /broken\.yaml:\d+: GwBackend default\/broken: spec: .*exactly one/);
    assert.match(JSON.stringify(status.resources), /GwBackend default\/broken not found/);
  } finally {
    await envoy.stop();
    await sluice.stop();
    await upstream.close();
  }

  let out = "";
  const code = await main(["validate", "-f", cfg.dir], { stdout: (t) => (out += t), stderr: () => {} });
  assert.equal(code, 1);
  assert.match(out, /broken\.yaml:\d+: GwBackend default\/broken: spec/);
});
