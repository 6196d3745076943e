// Control plane at scale: generated configurations of 100, 1,000 and 5,000 HTTPRoutes with policies at every level.
//
// Measures, per size: load + validation, full translation (without and with the memo `sluice serve` keeps),
// translation after a one-route change with that memo,
// snapshot size, process memory, and — with a real Envoy over SotW ADS, delta ADS (virtual hosts over VHDS) and delta
// ADS with `--no-vhds` (whole RouteConfigurations, the baseline VHDS is measured against) — the time from a file change to
// Envoy's ACK and to the new route answering, while a client keeps sending requests (failures counted).
//
// With `--modes kube` (the default runs both), the same through `sluice controller` on a real kube-apiserver: the time
// from the API write to the new route serving, and the controller's RSS holding the routes plus --slices
// EndpointSlices and --secrets Secrets.
//
//   node dist/bench/control-plane.js [--sizes 100,1000,5000] [--changes 20] [--modes file,kube]
//                                    [--slices 10000] [--secrets 1000]

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { FileSource } from "../src/sources/file-source.js";
import { KubeClient } from "../src/sources/kube/client.js";
import { makeInput } from "../src/translate/input.js";
import { TranslationMemo } from "../src/translate/memo.js";
import { translate } from "../src/translate/translate.js";
import { buildSnapshot } from "../src/xds-server/index.js";
import { controllerKubeconfig, gatewayEnvoy, hostAddress, startController } from "../test/helpers/controller.js";
import { type KubeCluster, startKubeCluster, yamlObjects } from "../test/helpers/kube.js";
import { type EchoBody, freePort, request, sleep, startEchoUpstream, waitFor } from "../test/helpers/net.js";
import { startSluice, startTestEnvoy, tempConfigDir } from "../test/helpers/processes.js";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "100,1000,5000" },
    changes: { type: "string", default: "20" },
    "in-process-only": { type: "boolean", default: false },
    modes: { type: "string", default: "file,kube" },
    slices: { type: "string", default: "10000" },
    secrets: { type: "string", default: "1000" },
  },
});
const modes = new Set(values.modes.split(","));
const sizes = values.sizes.split(",").map(Number);
const changes = Number(values.changes);

function gatewayYaml(port: number): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: bench }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${port} }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: gateway-wide, namespace: bench }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  traffic:
    timeouts: { request: 30s }
    headerModifiers: { response: { set: [{ name: x-level, value: gateway }] } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: listener-wide, namespace: bench }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: http }]
  traffic:
    headerModifiers: { request: { set: [{ name: x-level, value: listener }] } }
`;
}

function backendsYaml(a: number, b: number): string {
  return [
    ["a", a],
    ["b", b],
  ]
    .map(
      ([n, p]) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${n}, namespace: bench }
spec: { static: { host: 127.0.0.1, port: ${p} } }
`,
    )
    .join("");
}

function routeYaml(i: number, backend: "a" | "b"): string {
  const policies =
    i % 10 === 0
      ? `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: route-${i}, namespace: bench }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: route-${i} }]
  traffic: { timeouts: { request: 10s } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: rule-${i}, namespace: bench }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: route-${i}, sectionName: main }]
  traffic: { headerModifiers: { request: { set: [{ name: x-level, value: rule }] } } }
`
      : "";
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: route-${i}, namespace: bench }
spec:
  parentRefs: [{ name: gw }]
  hostnames: [host-${i % 50}.example.com]
  rules:
    - name: main
      matches: [{ path: { type: PathPrefix, value: /r/${i} } }, { path: { type: Exact, value: /exact/${i} }, method: GET }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${backend} }]
${policies}`;
}

/** Routes in files of 100, as a team would keep them. */
function writeRoutes(
  write: (name: string, text: string) => void,
  n: number,
  changed?: { i: number; backend: "a" | "b" },
) {
  for (let f = 0; f * 100 < n; f++) {
    let text = "";
    for (let i = f * 100; i < Math.min(n, (f + 1) * 100); i++) {
      text += routeYaml(i, changed?.i === i ? changed.backend : "a");
    }
    write(`routes-${String(f).padStart(3, "0")}.yaml`, text);
  }
}

function mb(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
}

async function inProcess(n: number): Promise<Record<string, string>> {
  const cfg = tempConfigDir();
  cfg.write("gateway.yaml", gatewayYaml(8080) + backendsYaml(9001, 9002));
  writeRoutes(cfg.write, n);
  const source = new FileSource([cfg.dir]);
  let t = performance.now();
  const load = await source.load();
  const loadMs = performance.now() - t;
  const input = () => makeInput(load.resources, load.sources, load.invalid);
  // Cold, as `sluice translate` does it (no memo), then as `sluice serve` starts (filling its memo).
  t = performance.now();
  translate(input(), { impliedGatewayClass: true });
  const translateMs = performance.now() - t;
  const memo = new TranslationMemo();
  t = performance.now();
  const result = translate(input(), { impliedGatewayClass: true, memo });
  const memoMs = performance.now() - t;
  t = performance.now();
  const snapshot = buildSnapshot(result.gateways[0]!.xds);
  const snapshotMs = performance.now() - t;
  let bytes = 0;
  for (const byType of snapshot.resources.values()) for (const r of byType.values()) bytes += r.value.length;
  // One route changes: reload (only the changed file is parsed) and translate again, as `sluice serve` does.
  const incremental: number[] = [];
  for (let k = 0; k < 7; k++) {
    writeRoutes(cfg.write, n, { i: (k * 37) % n, backend: k % 2 === 0 ? "b" : "a" });
    t = performance.now();
    const l2 = await source.load();
    const r2 = translate(makeInput(l2.resources, l2.sources, l2.invalid), { impliedGatewayClass: true, memo });
    buildSnapshot(r2.gateways[0]!.xds);
    incremental.push(performance.now() - t);
  }
  cfg.cleanup();
  return {
    routes: String(n),
    "load+validate ms": loadMs.toFixed(1),
    "translate ms": translateMs.toFixed(1),
    "translate+memo ms": memoMs.toFixed(1),
    "snapshot ms": snapshotMs.toFixed(1),
    "1-change reload+translate+snapshot ms (median)": quantile(incremental, 0.5).toFixed(1),
    "snapshot KB": (bytes / 1024).toFixed(0),
    "heap MB": mb(process.memoryUsage().heapUsed),
  };
}

/** How Envoy gets its xDS: state of the world, delta with virtual hosts over VHDS, or delta with whole RouteConfigurations. */
type XdsMode = "sotw" | "delta" | "delta-no-vhds";

async function withEnvoy(n: number, mode: XdsMode): Promise<Record<string, string>> {
  const delta = mode !== "sotw";
  const cfg = tempConfigDir();
  const a = await startEchoUpstream("a");
  const b = await startEchoUpstream("b");
  const port = await freePort();
  cfg.write("gateway.yaml", gatewayYaml(port) + backendsYaml(a.port, b.port));
  writeRoutes(cfg.write, n);
  const sluice = await startSluice("serve", cfg.dir, mode === "delta-no-vhds" ? { extraArgs: ["--no-vhds"] } : {});
  live.add(sluice.stop);
  const envoy = await startTestEnvoy(sluice, { gateway: "bench/gw", delta });
  live.add(envoy.stop);
  const host = (i: number) => ({ host: `host-${i % 50}.example.com` });
  await waitFor(
    "routes",
    async () => ((await request(port, "/r/1", { headers: host(1) })).status === 200 ? true : undefined),
    60_000,
  );

  // A client keeps sending requests to routes that do not change while others churn.
  let failures = 0;
  let sent = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const i = 1 + (sent % 7);
      try {
        const r = await request(port, `/r/${i}`, { headers: host(i) });
        if (r.status !== 200) failures++;
      } catch {
        failures++;
      }
      sent++;
    }
  })();

  const toServe: number[] = [];
  const toAck: number[] = [];
  for (let k = 0; k < changes; k++) {
    const i = 10 + ((k * 97) % (n - 10));
    const backend = "b";
    const fileIndex = Math.floor(i / 100);
    let text = "";
    for (let j = fileIndex * 100; j < Math.min(n, (fileIndex + 1) * 100); j++)
      text += routeYaml(j, j === i ? backend : "a");
    const before = JSON.stringify(await routeAcks(sluice.adminPort));
    const t = performance.now();
    writeFileSync(join(cfg.dir, `routes-${String(fileIndex).padStart(3, "0")}.yaml`), text);
    const ackP = waitFor(
      "ACK",
      async () => (JSON.stringify(await routeAcks(sluice.adminPort)) !== before ? performance.now() - t : undefined),
      10_000,
      2,
    );
    const serveP = waitFor(
      "new route",
      async () => {
        const r = await request(port, `/r/${i}`, { headers: host(i) });
        return r.status === 200 && (JSON.parse(r.body) as EchoBody).upstream === backend
          ? performance.now() - t
          : undefined;
      },
      10_000,
      2,
    );
    try {
      toAck.push(await ackP);
    } catch (e) {
      console.error("change", i, backend, before, JSON.stringify(await routeAcks(sluice.adminPort)));
      console.error(sluice.output.slice(-10).join("\n"));
      throw e;
    }
    toServe.push(await serveP);
    // Put it back so the next change is a change again, and let Envoy take it in before the next change is timed
    // (at thousands of routes Envoy needs a while per update, and the next change would wait for this one).
    const changed = JSON.stringify(await routeAcks(sluice.adminPort));
    let back = "";
    for (let j = fileIndex * 100; j < Math.min(n, (fileIndex + 1) * 100); j++) back += routeYaml(j, "a");
    writeFileSync(join(cfg.dir, `routes-${String(fileIndex).padStart(3, "0")}.yaml`), back);
    await waitFor(
      "ACK of the change put back",
      async () => (JSON.stringify(await routeAcks(sluice.adminPort)) !== changed ? true : undefined),
      10_000,
      5,
    );
    await sleep(150);
  }
  running = false;
  await loop;
  const rss = await fetch(`http://127.0.0.1:${sluice.adminPort}/metrics`).then((r) => r.text());
  // Envoy's own time to apply a RouteConfiguration (its histogram since start, cumulative): the floor under any
  // change→ACK figure, whatever Sluice does.
  const rdsLine = async () =>
    (await request(envoy.adminPort, "/stats?filter=update_duration")).body.split("\n").find((l) => l.includes(".rds."));
  // Histograms show in the admin output once Envoy has flushed its stats (every 5 s by default).
  let rds = await rdsLine();
  if (rds?.includes("P50") !== true) {
    await sleep(5500);
    rds = await rdsLine();
  }
  const envoyRds = (p: string) => new RegExp(` ${p}\\([^,]*,([^)]*)\\)`).exec(rds ?? "")?.[1] ?? "?";
  await envoy.stop();
  await sluice.stop();
  live.delete(envoy.stop);
  live.delete(sluice.stop);
  await a.close();
  await b.close();
  cfg.cleanup();
  return {
    routes: String(n),
    xds: mode,
    "change→ACK p50 ms": quantile(toAck, 0.5).toFixed(1),
    "change→ACK p90 ms": quantile(toAck, 0.9).toFixed(1),
    "change→serving p50 ms": quantile(toServe, 0.5).toFixed(1),
    "change→serving p90 ms": quantile(toServe, 0.9).toFixed(1),
    "Envoy RDS update p50/p90 ms": `${Number(envoyRds("P50")).toFixed(0)}/${Number(envoyRds("P90")).toFixed(0)}`,
    "sluice RSS MB": /sluice_process_resident_memory_bytes (\d+)/.exec(rss)?.[1]
      ? mb(Number(/sluice_process_resident_memory_bytes (\d+)/.exec(rss)?.[1]))
      : "?",
    "requests during churn": String(sent),
    failed: String(failures),
  };
}

/** Processes to stop if the run fails half-way, so no Envoy or sluice is left behind. */
const live = new Set<() => Promise<void>>();

async function routeAcks(adminPort: number): Promise<unknown> {
  const s = (await (await fetch(`http://127.0.0.1:${adminPort}/status/xds`)).json()) as {
    streams: { types: { typeUrl: string; ackedVersion?: string }[] }[];
  };
  // Over delta, Envoy gets route changes as VirtualHosts (VHDS); a change is ACKed on one type or the other.
  return s.streams.map((st) =>
    st.types.filter((t) => /RouteConfiguration$|VirtualHost$/.test(t.typeUrl)).map((t) => t.ackedVersion),
  );
}

console.log(
  `machine: ${(await import("node:os")).cpus().length} cores, ${(await import("node:os")).cpus()[0]?.model}; node ${process.version}`,
);
console.log("\n== in process: load, translate, snapshot ==");
const inProcessRows: Record<string, string>[] = [];
for (const n of sizes) inProcessRows.push(await inProcess(n));
console.table(inProcessRows);
if (values["in-process-only"]) process.exit(0);
/** Applies objects with `parallel` requests in flight (server-side apply, as kubectl --server-side would). */
async function applyAll(client: KubeClient, objects: readonly object[], parallel = 8): Promise<void> {
  let next = 0;
  const plural: Record<string, string> = {
    HTTPRoute: "httproutes",
    GwPolicy: "gwpolicies",
    GwBackend: "gwbackends",
    Gateway: "gateways",
    EndpointSlice: "endpointslices",
    Secret: "secrets",
    Service: "services",
  };
  const worker = async () => {
    while (next < objects.length) {
      const o = objects[next++] as { apiVersion: string; kind: string; metadata: { name: string; namespace: string } };
      const base = o.apiVersion.includes("/") ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
      await client.apply(
        `${base}/namespaces/${o.metadata.namespace}/${plural[o.kind]}/${o.metadata.name}`,
        o,
        "sluice-bench",
      );
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
}

/** The same configuration through `sluice controller`: API write → serving, and memory at scale. */
async function withKube(cluster: KubeCluster, n: number): Promise<Record<string, string>> {
  const admin = await KubeClient.load(cluster.adminKubeconfig);
  const system = await cluster.namespace("sluice-system");
  const kubeconfig = await controllerKubeconfig(cluster, system);
  const ns = await cluster.namespace("bench");
  const a = await startEchoUpstream("a");
  const b = await startEchoUpstream("b");
  const port = await freePort();
  const rename = (text: string) => text.replaceAll("namespace: bench", `namespace: ${ns}`);
  await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: sluice }
spec: { controllerName: sluice.dev/gateway-controller }
`);
  await applyAll(admin, yamlObjects(rename(gatewayYaml(port) + backendsYaml(a.port, b.port))));
  let routes = "";
  for (let i = 0; i < n; i++) routes += routeYaml(i, "a");
  let t = performance.now();
  await applyAll(admin, yamlObjects(rename(routes)));
  const applyMs = performance.now() - t;
  t = performance.now();
  const controller = await startController(kubeconfig, system);
  live.add(controller.stop);
  const readyMs = performance.now() - t;
  // With the client certificate the controller issued into the Gateway's Secret, as its pod would run.
  const envoy = await gatewayEnvoy(admin, controller, ns, "gw");
  live.add(envoy.stop);
  const host = (i: number) => ({ host: `host-${i % 50}.example.com` });
  await waitFor(
    "routes",
    async () => ((await request(port, "/r/1", { headers: host(1) })).status === 200 ? true : undefined),
    120_000,
  );
  // Changes are timed in a steady state: after the status of every created object has been written (a burst of
  // thousands of status writes keeps the API server and the controller busy for a while after start).
  t = performance.now();
  await waitFor(
    "status writes to settle",
    async () => {
      const w = ((await controller.status())["kube"] as { statusWrites: { pending: number; writes: number } })
        .statusWrites;
      return w.pending === 0 && w.writes >= n ? true : undefined;
    },
    300_000,
    200,
  );
  const settleMs = performance.now() - t;
  const toServe: number[] = [];
  const toApplied: number[] = [];
  const toAck: number[] = [];
  for (let k = 0; k < changes; k++) {
    const i = 10 + ((k * 97) % (n - 10));
    const before = JSON.stringify(await routeAcks(controller.adminPort));
    const t0 = performance.now();
    const ackP = waitFor(
      "ACK",
      async () =>
        JSON.stringify(await routeAcks(controller.adminPort)) !== before ? performance.now() - t0 : undefined,
      20_000,
      2,
    );
    await applyAll(admin, yamlObjects(rename(routeYaml(i, "b"))), 1);
    toApplied.push(performance.now() - t0);
    toAck.push(await ackP);
    toServe.push(
      await waitFor(
        "new route",
        async () => {
          const r = await request(port, `/r/${i}`, { headers: host(i) });
          return r.status === 200 && (JSON.parse(r.body) as EchoBody).upstream === "b"
            ? performance.now() - t0
            : undefined;
        },
        20_000,
        2,
      ),
    );
    await applyAll(admin, yamlObjects(rename(routeYaml(i, "a"))), 1);
    await waitFor(
      "route put back",
      async () => {
        const r = await request(port, `/r/${i}`, { headers: host(i) });
        return r.status === 200 && (JSON.parse(r.body) as EchoBody).upstream === "a" ? true : undefined;
      },
      20_000,
      5,
    );
    await sleep(150);
  }
  // The controller's own account of its last reloads (load, translate, publish), for where the time goes.
  const reloads = controller.output.filter((l) => l.startsWith("sluice: ") && l.includes(" resources, ")).slice(-4);
  console.log(`  ${n} routes, last reloads:\n    ${reloads.join("\n    ")}`);
  const memoryOf = async () => {
    const m = await fetch(`http://127.0.0.1:${controller.adminPort}/metrics`).then((r) => r.text());
    const of = (name: string) => Number(new RegExp(`sluice_process_${name}_bytes (\\d+)`).exec(m)?.[1] ?? Number.NaN);
    return `${mb(of("resident_memory"))} (heap ${mb(of("heap_used"))}/${mb(of("heap_total"))}, ext ${mb(of("external_memory"))})`;
  };
  const row: Record<string, string> = {
    routes: String(n),
    "apply routes s": (applyMs / 1000).toFixed(1),
    "controller ready ms": readyMs.toFixed(0),
    "status written s": (settleMs / 1000).toFixed(1),
    "API write answered p50 ms": quantile(toApplied, 0.5).toFixed(1),
    "API write→ACK p50 ms": quantile(toAck, 0.5).toFixed(1),
    "API write→serving p50 ms": quantile(toServe, 0.5).toFixed(1),
    "API write→serving p90 ms": quantile(toServe, 0.9).toFixed(1),
    "controller RSS MB": await memoryOf(),
  };
  if (n === Math.max(...sizes)) {
    // Memory at scale: EndpointSlices of many Services, and Secrets (a TLS certificate's size each).
    const slices = Number(values.slices);
    const secrets = Number(values.secrets);
    const ip = hostAddress();
    const objects: Record<string, unknown>[] = [];
    for (let i = 0; i < slices; i++) {
      objects.push({
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: { name: `svc-${i}-1`, namespace: ns, labels: { "kubernetes.io/service-name": `svc-${i}` } },
        addressType: "IPv4",
        ports: [{ name: "http", port: 8080 }],
        endpoints: [1, 2, 3].map((k) => ({ addresses: [ip], conditions: { ready: true }, hostname: `pod-${k}` })),
      });
    }
    const pem = `-----BEGIN CERTIFICATE-----\n${"A".repeat(1600)}\n-----END CERTIFICATE-----\n`;
    for (let i = 0; i < secrets; i++) {
      objects.push({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: `cert-${i}`, namespace: ns },
        type: "kubernetes.io/tls",
        data: { "tls.crt": Buffer.from(pem).toString("base64"), "tls.key": Buffer.from(pem).toString("base64") },
      });
    }
    t = performance.now();
    await applyAll(admin, objects, 16);
    row["+slices/+secrets"] = `${slices}/${secrets}`;
    row["apply those s"] = ((performance.now() - t) / 1000).toFixed(1);
    let held: unknown;
    try {
      await waitFor(
        "the controller to hold them",
        async () => {
          // A controller that exited is reported at once, with its last lines, not after the timeout.
          if (controller.child.exitCode !== null || controller.child.signalCode !== null) return false;
          const k = ((await controller.status())["kube"] as { kinds: Record<string, { objects: number }> }).kinds;
          held = { slices: k["EndpointSlice"]?.objects, secrets: k["Secret"]?.objects };
          return (k["EndpointSlice"]?.objects ?? 0) >= slices && (k["Secret"]?.objects ?? 0) >= secrets
            ? true
            : undefined;
        },
        300_000,
        500,
      ).then((held) => {
        if (!held)
          throw new Error(`the controller exited (${controller.child.exitCode ?? controller.child.signalCode})`);
      });
    } catch (e) {
      console.error(
        `holding ${JSON.stringify(held)}; the controller's last lines:\n${controller.output.slice(-15).join("\n")}`,
      );
      throw e;
    }
    await sleep(3000);
    row["controller RSS with them MB"] = await memoryOf();
    // And once the burst is well over (V8 gives back what its collector freed only some seconds later).
    await sleep(30_000);
    row["30 s later MB"] = await memoryOf();
  }
  await envoy.stop();
  await controller.stop();
  live.delete(envoy.stop);
  live.delete(controller.stop);
  // The next size starts from an empty cluster (there is no namespace controller to empty this namespace).
  for (const path of [
    "/apis/gateway.networking.k8s.io/v1/namespaces/NS/httproutes",
    "/apis/gateway.networking.k8s.io/v1/namespaces/NS/gateways",
    "/apis/sluice.dev/v1alpha1/namespaces/NS/gwpolicies",
    "/apis/sluice.dev/v1alpha1/namespaces/NS/gwbackends",
    "/apis/discovery.k8s.io/v1/namespaces/NS/endpointslices",
    "/api/v1/namespaces/NS/secrets",
  ])
    await admin.request("DELETE", path.replace("NS", ns), { timeoutMs: 120_000 });
  await a.close();
  await b.close();
  await admin.close();
  return row;
}

const rows: Record<string, string>[] = [];
const kubeRows: Record<string, string>[] = [];
try {
  if (modes.has("file")) {
    console.log("\n== through Envoy: file change to ACK and to serving, with a client running ==");
    for (const n of sizes) {
      for (const mode of ["sotw", "delta", "delta-no-vhds"] as const) rows.push(await withEnvoy(n, mode));
    }
    console.table(rows);
  }
  if (modes.has("kube")) {
    console.log("\n== through `sluice controller` on kube-apiserver: API write to serving (delta xDS) ==");
    const cluster = await startKubeCluster();
    live.add(cluster.stop);
    await cluster.installCrds();
    for (const n of sizes) kubeRows.push(await withKube(cluster, n));
    console.table(kubeRows);
  }
} finally {
  await Promise.all([...live].map((stop) => stop()));
}
