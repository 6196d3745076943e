// The translation memo (src/translate/memo.ts) changes how much is translated, never the result: after every edit of a
// sequence, a translation with the memo equals a full translation of the same input — statuses, IR, xDS, snapshot
// bytes and versions, policy tables, `sluice explain` report. The memo must also actually be used (hit counts), and
// each input an entry depends on must invalidate it.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import type { LoadResult } from "../../src/sources/file-source.js";
import { FileSource } from "../../src/sources/file-source.js";
import { makeInput } from "../../src/translate/input.js";
import { TranslationMemo } from "../../src/translate/memo.js";
import { type TranslationResult, translate } from "../../src/translate/translate.js";
import { xdsToJson } from "../../src/translate/xds/json.js";
import { buildSnapshot } from "../../src/xds-server/index.js";
import { goldenCases, goldenDir } from "../helpers/golden.js";
import { tempConfigDir } from "../helpers/processes.js";

function snapshots(r: TranslationResult) {
  return r.gateways.map((g) => {
    const s = buildSnapshot(g.xds);
    const types = [...s.resources].map(([type, byName]) => [
      type,
      [...byName].map(([name, x]) => [name, x.version, Buffer.from(x.value).toString("base64")]),
    ]);
    return { gateway: g.key, version: s.version, types };
  });
}

function comparable(r: TranslationResult) {
  return {
    statuses: r.statuses,
    ir: r.gateways.map((g) => [g.key, g.ir]),
    xds: r.gateways.map((g) => xdsToJson(g.xds)),
    snapshots: snapshots(r),
    extAuthz: [...r.extAuthzPolicies.keys()],
    llm: r.llm,
    report: r.policies,
  };
}

function translateBoth(load: LoadResult, memo: TranslationMemo, step: string) {
  const input = () => makeInput(load.resources, load.sources, load.invalid);
  const withMemo = translate(input(), { impliedGatewayClass: true, memo });
  const full = translate(input(), { impliedGatewayClass: true });
  assert.deepEqual(comparable(withMemo), comparable(full), `memoized translation differs from a full one: ${step}`);
  return withMemo;
}

/** Documents of a YAML file (split on `---` lines; comments before the first document dropped). */
function documents(text: string): string[] {
  return text
    .split(/^---$/m)
    .map((d) => d.trim())
    .filter((d) => d !== "" && !d.split("\n").every((l) => l.startsWith("#") || l.trim() === ""));
}

/** Edits applied to one document at a time: each changes the first match, when there is one. */
const EDITS: readonly [string, RegExp, (m: string, ...g: string[]) => string][] = [
  ["port", /port: (\d+)/, (_, p) => `port: ${Number(p) + 1}`],
  ["path", /value: \//, () => "value: /edited"],
  ["timeout", /(\d+)s\b/, (_, n) => `${Number(n) + 1}s`],
  ["name", /name: ([a-z][a-z0-9-]*)/, (_, n) => `name: ${n}-x`],
  ["hostname", /([a-z0-9-]+)\.example\.com/, (_, h) => `${h}-x.example.com`],
  ["expression", /== '([^']*)'/, (_, v) => `== '${v}-x'`],
  ["invalid", /^spec:/m, () => "spec:\n  bogusField: 1"],
];

for (const kind of ["translate", "policy"]) {
  test(`memo equals full translation over edits of every ${kind} golden`, async () => {
    const memo = new TranslationMemo();
    const cfg = tempConfigDir();
    try {
      let hits = 0;
      for (const name of goldenCases(goldenDir(kind))) {
        const docs = documents(readFileSync(join(goldenDir(kind), `${name}.in.yaml`), "utf8"));
        const original = docs.join("\n---\n");
        const variants: [string, string][] = [["original", original]];
        docs.forEach((_, i) => {
          variants.push([`without document ${i}`, docs.filter((_, j) => j !== i).join("\n---\n")]);
          variants.push(["original again", original]);
          for (const [edit, re, replace] of EDITS) {
            const doc = docs[i] ?? "";
            if (!re.test(doc)) continue;
            const edited = docs.map((d, j) => (j === i ? d.replace(re, replace as never) : d));
            variants.push([`${edit} edit in document ${i}`, edited.join("\n---\n")]);
            variants.push(["original again", original]);
          }
        });
        // One source for the whole sequence, as `sluice serve` has: unchanged documents keep their objects.
        const source = new FileSource([cfg.dir]);
        for (const [step, text] of variants) {
          cfg.write("config.yaml", text);
          translateBoth(await source.load(), memo, `${name}: ${step}`);
          hits += memo.stats().routeHits;
        }
      }
      assert.ok(hits > 0, "the memo was used");
    } finally {
      cfg.cleanup();
    }
  });
}

// ---- A Gateway with many routes and policies at every level, edited the way people do.

const GATEWAY = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: app }
spec:
  gatewayClassName: sluice
  listeners:
    - { name: http, protocol: HTTP, port: 8080 }
    - { name: other, protocol: HTTP, port: 9090, hostname: "*.other.example" }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: gateway-wide, namespace: app }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  traffic:
    timeouts: { request: 30s }
    headerModifiers: { response: { set: [{ name: x-level, value: gateway }] } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: listener-wide, namespace: app }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: http }]
  traffic:
    headerModifiers: { request: { set: [{ name: x-level, value: listener }] } }
`;

const BACKENDS = `apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: a, namespace: app }
spec: { static: { host: 127.0.0.1, port: 9001 } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: b, namespace: app }
spec: { static: { host: 127.0.0.1, port: 9002 } }
---
apiVersion: v1
kind: Service
metadata: { name: svc, namespace: app }
spec: { ports: [{ name: http, port: 80 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: svc-1, namespace: app, labels: { kubernetes.io/service-name: svc } }
addressType: IPv4
ports: [{ name: http, port: 8080 }]
endpoints: [{ addresses: [10.0.0.1] }]
---
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: app, labels: { keys: "yes" } }
stringData:
  k1: '{"keyHash": "sha256:2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"}'
`;

function route(i: number, backend = "a"): string {
  const ref =
    backend === "svc" ? "{ name: svc, port: 80 }" : `{ group: sluice.dev, kind: GwBackend, name: ${backend} }`;
  return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: route-${i}, namespace: app }
spec:
  parentRefs: [{ name: gw }]
  hostnames: [host-${i % 5}.example.com, h${i}.other.example]
  rules:
    - name: main
      matches: [{ path: { type: PathPrefix, value: /r/${i} } }, { path: { type: Exact, value: /exact/${i} }, method: GET }]
      backendRefs: [${ref}]
`;
}

function routePolicies(i: number, timeout = "10s"): string {
  return `apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: route-${i}, namespace: app }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: route-${i} }]
  traffic: { timeouts: { request: ${timeout} } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: rule-${i}, namespace: app }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: route-${i}, sectionName: main }]
  traffic:
    apiKeyAuthentication: { secretSelector: { matchLabels: { keys: "yes" } } }
    authorization: { policy: { matchExpressions: ["request.headers['x-n'].size() > ${i % 3}"] } }
`;
}

const N = 60;

interface Scene {
  backendOf: (i: number) => string;
  timeoutOf: (i: number) => string;
  routes: number[];
  gateway: string;
  backends: string;
  extra: string;
}

function write(cfg: ReturnType<typeof tempConfigDir>, s: Scene): void {
  cfg.write("gateway.yaml", s.gateway);
  cfg.write("backends.yaml", s.backends);
  cfg.write("extra.yaml", s.extra);
  for (let f = 0; f < N / 20; f++) {
    const docs: string[] = [];
    for (const i of s.routes) {
      if (Math.floor(i / 20) !== f) continue;
      docs.push(route(i, s.backendOf(i)));
      if (i % 10 === 0) docs.push(routePolicies(i, s.timeoutOf(i)));
    }
    cfg.write(`routes-${f}.yaml`, docs.join("---\n"));
  }
}

test("memo: each edit re-translates what it touches, and the result equals a full translation", async () => {
  const cfg = tempConfigDir();
  const memo = new TranslationMemo();
  const source = new FileSource([cfg.dir]);
  const all = [...Array(N).keys()];
  const base: Scene = {
    backendOf: (i) => (i % 7 === 0 ? "svc" : "a"),
    timeoutOf: () => "10s",
    routes: all,
    gateway: GATEWAY,
    backends: BACKENDS,
    extra: "",
  };
  const step = async (name: string, scene: Scene) => {
    write(cfg, scene);
    translateBoth(await source.load(), memo, name);
    return memo.stats();
  };
  try {
    // Each route is attached through the two listeners whose hostnames it matches.
    let s = await step("first translation", base);
    assert.equal(s.routeHits, 0);
    s = await step("nothing changed", base);
    assert.equal(s.routeMisses, 0);
    assert.equal(s.buildMisses, 0);

    s = await step("one route's backend", { ...base, backendOf: (i) => (i === 13 ? "b" : base.backendOf(i)) });
    assert.equal(s.routeMisses, 1);
    s = await step("back", base);
    assert.equal(s.routeMisses, 1);

    s = await step("a route-level policy", { ...base, timeoutOf: (i) => (i === 20 ? "12s" : "10s") });
    assert.equal(s.routeMisses, 1, "only the route the policy targets");
    s = await step("back", base);

    s = await step("a route deleted", { ...base, routes: all.filter((i) => i !== 33) });
    assert.equal(s.routeMisses, 0);
    s = await step("and added again", base);
    assert.equal(s.routeMisses, 1);

    const gatewayEdit = GATEWAY.replace("value: gateway }", "value: gateway-2 }");
    s = await step("a Gateway-level policy", { ...base, gateway: gatewayEdit });
    assert.equal(s.routeMisses, N, "every route is under the Gateway-level policy");
    s = await step("back", base);

    const listenerEdit = GATEWAY.replace('hostname: "*.other.example"', 'hostname: "*.else.example"');
    s = await step("a listener", { ...base, gateway: listenerEdit });
    assert.equal(s.routeHits, 0, "listeners changed: no route outcome is reused");
    s = await step("back", base);

    s = await step("a GwBackend's address", { ...base, backends: BACKENDS.replace("port: 9001", "port: 9005") });
    assert.equal(s.routeMisses, 0, "the cluster changes, not the routes");
    s = await step("back", base);

    s = await step("a GwBackend deleted", { ...base, backends: BACKENDS.replace(/^.*name: b,[\s\S]*?---\n/m, "") });
    s = await step("and b in use, then deleted", {
      ...base,
      backendOf: (i) => (i === 5 ? "b" : base.backendOf(i)),
      backends: BACKENDS.replace(/^kind: GwBackend\nmetadata: \{ name: b,[^\n]*\n[^\n]*\n---\n/m, ""),
    });
    assert.ok(s.routeMisses >= 1, "a route whose backend disappeared is translated again");
    s = await step("back", base);

    s = await step("endpoints", { ...base, backends: BACKENDS.replace("10.0.0.1", "10.0.0.2") });
    assert.equal(s.routeMisses, 0, "endpoints change clusters, not routes");
    s = await step("back", base);

    s = await step("a Secret with API keys", { ...base, backends: BACKENDS.replace("k1:", "k2:") });
    assert.ok(s.buildMisses > 0, "routes with API key authentication are built again");
    s = await step("back", base);

    // Gateway API kinds are validated by their envelope in file mode; a wrong apiVersion makes them invalid.
    const invalidRoute = (i: number) =>
      route(i, "a").replace("gateway.networking.k8s.io/v1", "gateway.networking.k8s.io/v9");
    s = await step("an invalid route document", { ...base, extra: invalidRoute(7).replace("route-7", "route-new") });
    s = await step("an invalid version of a served route", { ...base, extra: invalidRoute(8) });
    s = await step("an invalid policy", {
      ...base,
      extra: routePolicies(30).replace("timeouts: { request: 10s }", "timeouts: { request: 10s }, bogus: 1"),
    });
    s = await step("back", base);

    s = await step("a selector policy", {
      ...base,
      extra: `apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: by-label, namespace: app }
spec:
  targetSelectors: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, matchLabels: { team: x } }]
  traffic: { timeouts: { request: 3s } }
`,
    });
    s = await step("a GRPCRoute sharing a route's name", {
      ...base,
      extra: `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: { name: route-3, namespace: app }
spec:
  parentRefs: [{ name: gw }]
  hostnames: [host-3.example.com]
  rules: [{ backendRefs: [{ name: svc, port: 80 }] }]
`,
    });
    s = await step("back", base);
    assert.equal(s.routeMisses, 1, "route-3 again");
  } finally {
    cfg.cleanup();
  }
});

test("memo: a translation that fails half-way leaves the memo usable", async () => {
  const cfg = tempConfigDir();
  const memo = new TranslationMemo();
  const source = new FileSource([cfg.dir]);
  const all = [...Array(N).keys()];
  const base: Scene = {
    backendOf: () => "a",
    timeoutOf: () => "10s",
    routes: all,
    gateway: GATEWAY,
    backends: BACKENDS,
    extra: "",
  };
  try {
    write(cfg, base);
    translateBoth(await source.load(), memo, "first");
    // Gateway API kinds are checked by their envelope only in file mode; this rule list makes translation throw.
    write(cfg, { ...base, routes: all.filter((i) => i !== 9), extra: route(9).replace("rules:", "rules: 3\n  x:") });
    const broken = await source.load();
    try {
      translate(makeInput(broken.resources, broken.sources, broken.invalid), { impliedGatewayClass: true, memo });
    } catch {
      // The point is what comes next.
    }
    write(cfg, { ...base, backendOf: (i) => (i === 4 ? "b" : "a") });
    translateBoth(await source.load(), memo, "after a failed translation");
    write(cfg, base);
    translateBoth(await source.load(), memo, "and back");
  } finally {
    cfg.cleanup();
  }
});
