// VHDS through a real Envoy on delta ADS: a change to one route sends only its virtual host, Envoy applies it without
// an RDS update, a hostname that goes away stops routing, and the listener does not answer 404 while warming.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { gatewayYaml } from "../helpers/gateway.js";
import { type EchoBody, freePort, request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";

const VHDS = "type.googleapis.com/envoy.config.route.v3.VirtualHost";
const RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

function backendsYaml(ups: Record<string, Upstream>): string {
  return Object.entries(ups)
    .map(
      ([n, u]) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${n}, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${u.port} } }
`,
    )
    .join("");
}

function routeYaml(host: string, backend: string): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${host.split(".")[0]}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  hostnames: [${host}]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${backend} }] }]
`;
}

interface TypeStatus {
  typeUrl: string;
  ackedVersion?: string;
  sentVersion?: string;
  sentNonce?: string;
  lastSent?: { resources: string[]; removed: string[] };
}

async function typeStatus(sluice: SluiceProcess, typeUrl: string): Promise<TypeStatus | undefined> {
  const status = (await sluice.status()) as { xds: { streams: { types: TypeStatus[] }[] } };
  return status.xds.streams[0]?.types.find((t) => t.typeUrl === typeUrl);
}

const vhdsStatus = (sluice: SluiceProcess) => typeStatus(sluice, VHDS);

/** A counter from Envoy's admin /stats whose name ends with `suffix` (summed over route configurations). */
async function envoyCounter(envoy: TestEnvoy, suffix: string): Promise<number> {
  const body = (await request(envoy.adminPort, "/stats?filter=config_reload")).body;
  return body
    .split("\n")
    .filter((l) => {
      const name = l.split(":")[0] ?? "";
      return suffix === ".vhds.config_reload" ? /\.vhds\..*\.config_reload$/.test(name) : name.endsWith(suffix);
    })
    .reduce((sum, l) => sum + Number(l.split(":")[1]), 0);
}

async function upstreamOf(port: number, host: string): Promise<string | number> {
  const r = await request(port, "/", { headers: { host } });
  return r.status === 200 ? (JSON.parse(r.body) as EchoBody).upstream : r.status;
}

describe("VHDS through Envoy on delta ADS", () => {
  const cfg = tempConfigDir();
  const ups: Record<string, Upstream> = {};
  let port = 0;
  let sluice: SluiceProcess;
  let envoy: TestEnvoy;
  const hosts = ["one.example", "two.example", "three.example"];

  before(async () => {
    for (const n of ["a", "b"]) ups[n] = await startEchoUpstream(n);
    port = await freePort();
    cfg.write("gateway.yaml", gatewayYaml(port));
    cfg.write("backends.yaml", backendsYaml(ups));
    for (const h of hosts) cfg.write(`${h}.yaml`, routeYaml(h, "a"));
    sluice = await startSluice("serve", cfg.dir);
    envoy = await startTestEnvoy(sluice, { delta: true });
  });

  after(async () => {
    await envoy?.stop();
    await sluice?.stop();
    for (const u of Object.values(ups)) await u.close();
    cfg.cleanup();
  });

  test("once Envoy is ready, every virtual host answers (the listener waited for VHDS)", async () => {
    // No retry: VHDS is an init target of the route configuration, so a ready Envoy already has the virtual hosts.
    for (const h of hosts) assert.equal(await upstreamOf(port, h), "a", h);
    const vhds = await vhdsStatus(sluice);
    assert.ok(vhds?.ackedVersion, "Envoy subscribed to and acknowledged VirtualHosts");
  });

  test("a change to one route sends only its virtual host, applied without an RDS update", async () => {
    const rdsBefore = await typeStatus(sluice, RDS);
    const vhdsBefore = await envoyCounter(envoy, ".vhds.config_reload");
    const sentBefore = (await vhdsStatus(sluice))?.sentVersion;
    cfg.write("two.example.yaml", routeYaml("two.example", "b"));
    await waitFor("two.example to move to b", async () =>
      (await upstreamOf(port, "two.example")) === "b" ? true : undefined,
    );
    const vhds = await vhdsStatus(sluice);
    assert.notEqual(vhds?.sentVersion, sentBefore);
    const rc = `gateway/default/gw/port/${port}`;
    assert.deepEqual(vhds?.lastSent, { resources: [`${rc}/two.example`], removed: [] });
    assert.equal(await upstreamOf(port, "one.example"), "a");
    const rds = await typeStatus(sluice, RDS);
    assert.ok(rds?.sentNonce !== undefined && rds.sentNonce === rdsBefore?.sentNonce, "no RouteConfiguration was sent");
    // Envoy's VHDS counter (http.<prefix>.vhds.<route configuration>.config_reload) counted the update.
    assert.ok((await envoyCounter(envoy, ".vhds.config_reload")) > vhdsBefore);
  });

  test("a hostname that goes away stops routing", async () => {
    cfg.remove("three.example.yaml");
    await waitFor("three.example to stop routing", async () =>
      (await upstreamOf(port, "three.example")) === 404 ? true : undefined,
    );
    const rc = `gateway/default/gw/port/${port}`;
    assert.deepEqual((await vhdsStatus(sluice))?.lastSent, { resources: [], removed: [`${rc}/three.example`] });
    assert.equal(await upstreamOf(port, "one.example"), "a");
    assert.equal(await upstreamOf(port, "two.example"), "b");
  });
});

describe("--no-vhds: delta Envoys get whole RouteConfigurations", () => {
  const cfg = tempConfigDir();
  let up: Upstream;
  let port = 0;
  let sluice: SluiceProcess;
  let envoy: TestEnvoy;

  before(async () => {
    up = await startEchoUpstream("a");
    port = await freePort();
    cfg.write("gateway.yaml", gatewayYaml(port));
    cfg.write("backends.yaml", backendsYaml({ a: up }));
    cfg.write("one.yaml", routeYaml("one.example", "a"));
    sluice = await startSluice("serve", cfg.dir, { extraArgs: ["--no-vhds"] });
    envoy = await startTestEnvoy(sluice, { delta: true });
  });

  after(async () => {
    await envoy?.stop();
    await sluice?.stop();
    await up?.close();
    cfg.cleanup();
  });

  test("routes are served, and no VirtualHost resource is ever sent", async () => {
    await waitFor("one.example", async () => ((await upstreamOf(port, "one.example")) === "a" ? true : undefined));
    assert.ok((await typeStatus(sluice, RDS))?.ackedVersion, "the RouteConfiguration was acknowledged");
    assert.equal((await vhdsStatus(sluice))?.sentVersion, undefined);
    assert.equal(await envoyCounter(envoy, ".vhds.config_reload"), 0);
  });
});
