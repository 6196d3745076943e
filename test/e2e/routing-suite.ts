// End-to-end routing through a real Envoy fed by `sluice serve` over ADS. Run once with state-of-the-world and
// once with delta xDS (routing-sotw.test.ts, routing-delta.test.ts), in parallel.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { gatewayYaml } from "../helpers/gateway.js";
import { type EchoBody, freePort, request, sleep, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";

function backendsYaml(ups: Record<string, Upstream>): string {
  return Object.values(ups)
    .map(
      (u) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${u.name}, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${u.port} } }
`,
    )
    .join("");
}

function routesYaml(version: "v1" | "v2"): string {
  const rootBackend = version === "v1" ? "a" : "c";
  return `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: app, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: Exact, value: /exact } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: b }]
    - matches: [{ path: { type: PathPrefix, value: /api } }]
      filters:
        - type: RequestHeaderModifier
          requestHeaderModifier:
            set: [{ name: x-route, value: api }]
            remove: [x-secret]
        - type: ResponseHeaderModifier
          responseHeaderModifier:
            add: [{ name: x-gateway, value: sluice }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: b }]
    - matches:
        - path: { type: PathPrefix, value: /api }
          headers: [{ name: x-env, value: canary }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: c }]
    - matches:
        - path: { type: PathPrefix, value: /form }
          method: POST
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: c }]
    - matches:
        - path: { type: RegularExpression, value: "^/items/[0-9]+$" }
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: c }]
    - matches: [{ path: { type: PathPrefix, value: /split } }]
      backendRefs:
        - { group: sluice.dev, kind: GwBackend, name: a, weight: 3 }
        - { group: sluice.dev, kind: GwBackend, name: b, weight: 1 }
    - matches: [{ path: { type: PathPrefix, value: / } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${rootBackend} }]
`;
}

async function upstreamOf(port: number, path: string, opts: Parameters<typeof request>[2] = {}): Promise<string> {
  const r = await request(port, path, opts);
  assert.equal(r.status, 200, `${opts.method ?? "GET"} ${path}: ${r.status} ${r.body}`);
  return (JSON.parse(r.body) as EchoBody).upstream;
}

export function routingSuite(delta: boolean): void {
  describe(`routing through Envoy over ${delta ? "delta" : "state-of-the-world"} ADS`, () => {
    const cfg = tempConfigDir();
    const ups: Record<string, Upstream> = {};
    let port = 0;
    let sluice: SluiceProcess;
    let envoy: TestEnvoy;

    before(async () => {
      for (const n of ["a", "b", "c"]) ups[n] = await startEchoUpstream(n);
      port = await freePort();
      cfg.write("gateway.yaml", gatewayYaml(port));
      cfg.write("backends.yaml", backendsYaml(ups));
      cfg.write("routes.yaml", routesYaml("v1"));
      sluice = await startSluice("serve", cfg.dir);
      envoy = await startTestEnvoy(sluice, { delta });
      await waitFor("the route to answer", async () => ((await request(port, "/")).status === 200 ? true : undefined));
    });

    after(async () => {
      await envoy?.stop();
      await sluice?.stop();
      for (const u of Object.values(ups)) await u.close();
      cfg.cleanup();
    });

    test("Envoy fetched its config over ADS with the requested protocol", async () => {
      const status = (await sluice.status()) as { xds: { streams: { kind: string; group: string }[] } };
      const streams = status.xds.streams.filter((s) => s.group === "default/gw");
      assert.ok(streams.length >= 1, JSON.stringify(status.xds));
      assert.ok(streams.every((s) => s.kind === (delta ? "delta" : "sotw")));
    });

    test("path matches: exact, prefix and regular expression, by precedence", async () => {
      assert.equal(await upstreamOf(port, "/exact"), "b");
      assert.equal(await upstreamOf(port, "/exact/more"), "a"); // exact does not match longer paths
      assert.equal(await upstreamOf(port, "/api"), "b");
      assert.equal(await upstreamOf(port, "/api/users"), "b");
      assert.equal(await upstreamOf(port, "/apix"), "a"); // prefixes match whole segments
      assert.equal(await upstreamOf(port, "/items/42"), "c");
      assert.equal(await upstreamOf(port, "/items/x"), "a");
    });

    test("header and method matches", async () => {
      assert.equal(await upstreamOf(port, "/api/x", { headers: { "x-env": "canary" } }), "c");
      assert.equal(await upstreamOf(port, "/api/x", { headers: { "x-env": "prod" } }), "b");
      assert.equal(await upstreamOf(port, "/form", { method: "POST", body: "a=1" }), "c");
      assert.equal(await upstreamOf(port, "/form"), "a");
    });

    test("request and response header modifiers", async () => {
      const r = await request(port, "/api/h", { headers: { "x-secret": "s3cr3t", "x-route": "client" } });
      const echo = JSON.parse(r.body) as EchoBody;
      assert.equal(echo.headers["x-route"], "api");
      assert.equal(echo.headers["x-secret"], undefined);
      assert.equal(r.headers["x-gateway"], "sluice");
    });

    test("weighted backends split within tolerance (3:1)", async () => {
      const counts: Record<string, number> = { a: 0, b: 0 };
      const n = 400;
      for (let i = 0; i < n; i++) {
        const u = await upstreamOf(port, "/split");
        counts[u] = (counts[u] ?? 0) + 1;
      }
      const shareA = (counts["a"] ?? 0) / n;
      assert.ok(shareA > 0.65 && shareA < 0.85, `share of a = ${shareA} (${JSON.stringify(counts)}), expected ~0.75`);
    });

    test("a changed route file takes effect within 1 s without restarting Envoy", async (t) => {
      const pid = envoy.process.child.pid;
      const started = performance.now();
      cfg.write("routes.yaml", routesYaml("v2"));
      await waitFor("the new route", async () => ((await upstreamOf(port, "/")) === "c" ? true : undefined), 5000, 5);
      const ms = performance.now() - started;
      t.diagnostic(`file write to new route answering: ${ms.toFixed(1)} ms`);
      assert.ok(ms < 1000, `took ${ms.toFixed(0)} ms`);
      assert.equal(envoy.process.child.pid, pid);
      assert.equal(envoy.process.child.exitCode, null);
      cfg.write("routes.yaml", routesYaml("v1"));
      await waitFor(
        "the old route back",
        async () => ((await upstreamOf(port, "/")) === "a" ? true : undefined),
        5000,
        5,
      );
    });

    test("a broken file keeps the old routes serving, and fixing it recovers", async () => {
      cfg.write("routes.yaml", `${routesYaml("v2")}\n  this: is: not yaml: [\n`);
      await waitFor("sluice to report the syntax error", async () => {
        const s = (await sluice.status()) as { lastReload?: { problems: string[] } };
        return s.lastReload?.problems.some((p) => p.includes("routes.yaml") && p.includes("YAML syntax error"))
          ? true
          : undefined;
      });
      for (let i = 0; i < 20; i++) {
        assert.equal(await upstreamOf(port, "/"), "a");
        assert.equal(await upstreamOf(port, "/exact"), "b");
        await sleep(10);
      }
      cfg.write("routes.yaml", routesYaml("v2"));
      await waitFor("recovery", async () => ((await upstreamOf(port, "/")) === "c" ? true : undefined), 5000);
      cfg.write("routes.yaml", routesYaml("v1"));
      await waitFor("the old route back", async () => ((await upstreamOf(port, "/")) === "a" ? true : undefined), 5000);
    });

    test("killing and restarting sluice interrupts no request", async (t) => {
      let failures = 0;
      let done = 0;
      let running = true;
      const loop = (async () => {
        while (running) {
          try {
            const r = await request(port, "/api/x");
            if (r.status !== 200) failures++;
          } catch {
            failures++;
          }
          done++;
        }
      })();
      await sleep(200);
      const xdsPort = sluice.xdsPort;
      const adminPort = sluice.adminPort;
      const authzPort = sluice.authzPort;
      await sluice.stop("SIGKILL");
      await sleep(500);
      sluice = await startSluice("serve", cfg.dir, { xdsPort, authzPort, adminPort });
      // Envoy reconnects (with backoff) and a change made afterwards reaches it.
      await waitFor(
        "Envoy to reconnect",
        async () => {
          const s = (await sluice.status()) as { xds: { streams: { group: string }[] } };
          return s.xds.streams.some((x) => x.group === "default/gw") ? true : undefined;
        },
        30_000,
        100,
      );
      cfg.write("routes.yaml", routesYaml("v2"));
      await waitFor(
        "a change after the restart",
        async () => ((await upstreamOf(port, "/")) === "c" ? true : undefined),
        5000,
      );
      running = false;
      await loop;
      t.diagnostic(`${done} requests during the restart, ${failures} failed`);
      assert.equal(failures, 0, `${failures} of ${done} requests failed`);
      assert.ok(done > 50, `only ${done} requests were sent`);
    });
  });
}
