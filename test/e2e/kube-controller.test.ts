// `sluice controller` against a real kube-apiserver and a real Envoy: resources written through the API (a
// GatewayClass, a Gateway, HTTPRoutes, a GwPolicy with JWT and authorization, an LLM GwBackend) become traffic through
// Envoy, and status comes back on every one of them, field by field. The controller runs with exactly the RBAC in
// deploy/kubernetes. Another controller's GatewayClass, Gateway and route parents stay untouched; a resource the API
// server accepts but Sluice refuses gets a status naming the field while the rest keeps serving.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import OpenAI from "openai";
import { main } from "../../src/cli/main.js";
import type { KubeClient, KubeObject } from "../../src/sources/kube/client.js";
import {
  clusterForController,
  conditionOf,
  gatewayEnvoy,
  hostAddress,
  kubeRouteYaml,
  kubeServiceYaml,
  SLUICE_GATEWAY_CLASS,
  startController,
  waitForObject,
} from "../helpers/controller.js";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import type { KubeCluster } from "../helpers/kube.js";
import { freePort, request, sleep, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import { type SluiceProcess, startTestEnvoy, type TestEnvoy } from "../helpers/processes.js";

let portB = 0;
let portLs = 0;

const GW = "/apis/gateway.networking.k8s.io/v1";
const SLUICE = "/apis/sluice.dev/v1alpha1";
const OTHER = "example.com/other-controller";

describe("sluice controller on a real API server", { timeout: 240_000 }, () => {
  let cluster: KubeCluster;
  let admin: KubeClient;
  let controller: SluiceProcess;
  let envoy: TestEnvoy;
  let app: Upstream;
  let provider: FakeProvider;
  let ns: string;
  let port: number;
  let key: Awaited<ReturnType<typeof generateKeyPair>>;
  const token = (sub: string) =>
    new SignJWT({ sub })
      .setProtectedHeader({ alg: "RS256", kid: "k1" })
      .setIssuer("https://issuer.test")
      .setAudience("api")
      .setIssuedAt()
      .setExpirationTime("10m")
      .sign(key.privateKey);

  before(async () => {
    const c = await clusterForController();
    ({ cluster, admin, ns } = c);
    const { system, kubeconfig } = c;
    port = await freePort();
    portB = await freePort();
    portLs = await freePort();
    app = await startEchoUpstream("app", 0, hostAddress());
    provider = await startFakeProvider({ name: "llm" });
    key = await generateKeyPair("RS256", { extractable: true });
    const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(key.publicKey)), kid: "k1", alg: "RS256" }] });
    await cluster.apply(`${SLUICE_GATEWAY_CLASS}---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: other }
spec: { controllerName: ${OTHER} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: ${ns} }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  allowedListeners: { namespaces: { from: Same } }
  listeners: [{ name: http, protocol: HTTP, port: ${port} }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: { name: more, namespace: ${ns} }
spec:
  parentRef: { name: gw }
  listeners: [{ name: extra, protocol: HTTP, port: ${portLs} }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw-b, namespace: ${ns} }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${portB} }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: b, namespace: ${ns} }
spec:
  parentRefs: [{ name: gw-b }]
  rules: [{ backendRefs: [{ name: app, port: 80 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: foreign, namespace: ${ns} }
spec:
  gatewayClassName: other
  listeners: [{ name: http, protocol: HTTP, port: 80 }]
${kubeServiceYaml(ns, "app", app.port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: ${ns} }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: open
      matches: [{ path: { type: PathPrefix, value: /app } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: secure
      matches: [{ path: { type: PathPrefix, value: /secure } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: llm
      matches: [{ path: { type: PathPrefix, value: /v1 } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: shared, namespace: ${ns} }
spec:
  parentRefs: [{ name: gw }, { name: foreign }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /shared } }]
      backendRefs: [{ name: app, port: 80 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: secure, namespace: ${ns} }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: secure }]
  traffic:
    jwtAuthentication:
      providers: [{ issuer: "https://issuer.test", audiences: [api], jwks: { inline: '${jwks}' } }]
    authorization: { action: Allow, policy: { matchExpressions: ["jwt.sub == 'alice'"] } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: ${ns} }
spec:
  ai:
    groups:
      - providers:
          - { name: p, providerA: {}, host: 127.0.0.1, port: ${provider.port} }
`);
    // Another controller's entry in the shared route's parents, written before Sluice starts.
    await admin.apply(
      `${GW}/namespaces/${ns}/httproutes/shared/status`,
      {
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "HTTPRoute",
        metadata: { name: "shared", namespace: ns },
        status: {
          parents: [
            {
              parentRef: { name: "foreign" },
              controllerName: OTHER,
              conditions: [
                {
                  type: "Accepted",
                  status: "True",
                  reason: "Accepted",
                  message: "theirs",
                  lastTransitionTime: "2026-01-01T00:00:00Z",
                  observedGeneration: 1,
                },
              ],
            },
          ],
        },
      },
      OTHER,
    );
    controller = await startController(kubeconfig, system);
    envoy = await gatewayEnvoy(admin, controller, ns, "gw");
    await waitFor("the route to serve", async () => ((await request(port, "/app")).status === 200 ? true : undefined));
  });

  after(async () => {
    await envoy?.stop();
    await controller?.stop();
    await app?.close();
    await provider?.close();
    await admin?.close();
    await cluster?.stop();
  });

  test("traffic through Envoy: a route, JWT + authorization, an LLM backend", async () => {
    assert.equal((await request(port, "/app/x")).status, 200);
    assert.equal((await request(port, "/secure")).status, 401);
    assert.equal(
      (await request(port, "/secure", { headers: { authorization: `Bearer ${await token("alice")}` } })).status,
      200,
    );
    assert.equal(
      (await request(port, "/secure", { headers: { authorization: `Bearer ${await token("bob")}` } })).status,
      403,
    );
    const client = new OpenAI({ apiKey: "k", baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
    const answer = await client.chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.match(answer.choices[0]?.message.content ?? "", /llm/);
  });

  test("GatewayClass status: ours Accepted with its features, the other controller's untouched", async () => {
    const ours = await waitForObject(
      admin,
      `${GW}/gatewayclasses/sluice`,
      "GatewayClass accepted",
      (o) => conditionOf(statusOf(o)["conditions"], "Accepted")?.status === "True",
    );
    const accepted = conditionOf(statusOf(ours)["conditions"], "Accepted");
    assert.equal(accepted?.reason, "Accepted");
    assert.equal(accepted?.observedGeneration, ours.metadata.generation);
    assert.match(accepted?.lastTransitionTime ?? "", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const features = (statusOf(ours)["supportedFeatures"] as { name: string }[]).map((f) => f.name);
    assert.ok(features.includes("HTTPRoute") && features.includes("Gateway"), features.join(","));
    assert.deepEqual(features, [...features].sort());
    const other = await admin.get<KubeObject>(`${GW}/gatewayclasses/other`);
    assert.notEqual(conditionOf(statusOf(other)["conditions"], "Accepted")?.status, "True");
    assert.ok(!managers(other).includes("sluice.dev/gateway-controller"), managers(other).join(","));
  });

  test("Gateway status: Accepted, Programmed, listeners with attachedRoutes, addresses", async () => {
    const gw = await waitForObject(
      admin,
      `${GW}/namespaces/${ns}/gateways/gw`,
      "Gateway programmed",
      (o) => conditionOf(statusOf(o)["conditions"], "Programmed")?.status === "True",
    );
    const s = statusOf(gw);
    for (const type of ["Accepted", "Programmed"]) {
      const c = conditionOf(s["conditions"], type);
      assert.equal(c?.status, "True", type);
      assert.equal(c?.reason, type);
      assert.equal(c?.observedGeneration, gw.metadata.generation);
    }
    assert.deepEqual(s["addresses"], [{ type: "IPAddress", value: "127.0.0.1" }]);
    const listeners = s["listeners"] as { name: string; attachedRoutes: number; conditions: unknown }[];
    assert.equal(listeners.length, 1);
    assert.equal(listeners[0]?.name, "http");
    assert.equal(listeners[0]?.attachedRoutes, 2);
    for (const type of ["Accepted", "ResolvedRefs", "Programmed"])
      assert.equal(conditionOf(listeners[0]?.conditions, type)?.status, "True", `listener ${type}`);
    const foreign = await admin.get<KubeObject>(`${GW}/namespaces/${ns}/gateways/foreign`);
    assert.ok(!managers(foreign).includes("sluice.dev/gateway-controller"));
  });

  test("ListenerSet status: Accepted, Programmed, its listeners", async () => {
    const ls = await waitForObject(
      admin,
      `${GW}/namespaces/${ns}/listenersets/more`,
      "ListenerSet accepted",
      (o) => conditionOf(statusOf(o)["conditions"], "Accepted")?.status === "True",
    );
    assert.equal(conditionOf(statusOf(ls)["conditions"], "Programmed")?.status, "True");
    assert.equal(conditionOf(statusOf(ls)["conditions"], "Accepted")?.observedGeneration, ls.metadata.generation);
    const listeners = statusOf(ls)["listeners"] as { name: string; conditions: unknown }[];
    assert.deepEqual(
      listeners.map((l) => l.name),
      ["extra"],
    );
    assert.equal(conditionOf(listeners[0]?.conditions, "Programmed")?.status, "True");
  });

  test("HTTPRoute status: our parent entries, the other controller's entry kept", async () => {
    const r = await waitForObject(admin, `${GW}/namespaces/${ns}/httproutes/r`, "route accepted", (o) =>
      parentsOf(o).some((p) => conditionOf(p.conditions, "Accepted")?.status === "True"),
    );
    const parents = parentsOf(r);
    assert.equal(parents.length, 1);
    assert.deepEqual(parents[0]?.parentRef, { group: "gateway.networking.k8s.io", kind: "Gateway", name: "gw" });
    assert.equal(parents[0]?.controllerName, "sluice.dev/gateway-controller");
    assert.equal(conditionOf(parents[0]?.conditions, "ResolvedRefs")?.status, "True");
    assert.equal(conditionOf(parents[0]?.conditions, "Accepted")?.observedGeneration, r.metadata.generation);

    const shared = await waitForObject(admin, `${GW}/namespaces/${ns}/httproutes/shared`, "shared route", (o) =>
      parentsOf(o).some((p) => p.controllerName === "sluice.dev/gateway-controller"),
    );
    const theirs = parentsOf(shared).filter((p) => p.controllerName === OTHER);
    assert.equal(theirs.length, 1, "the other controller's entry is kept");
    assert.equal(conditionOf(theirs[0]?.conditions, "Accepted")?.message, "theirs");
    const ours = parentsOf(shared).filter((p) => p.controllerName === "sluice.dev/gateway-controller");
    assert.equal(ours.length, 1, "no entry for a parent of another controller");
    assert.equal((ours[0]?.parentRef as { name?: string } | undefined)?.name, "gw");
  });

  test("GwPolicy and GwBackend status", async () => {
    const policy = await waitForObject(admin, `${SLUICE}/namespaces/${ns}/gwpolicies/secure`, "policy attached", (o) =>
      ancestorsOf(o).some((a) => conditionOf(a.conditions, "Attached")?.status === "True"),
    );
    const ancestors = ancestorsOf(policy);
    assert.equal(ancestors.length, 1);
    assert.equal(ancestors[0]?.controllerName, "sluice.dev/gateway-controller");
    assert.equal((ancestors[0]?.ancestorRef as { name?: string } | undefined)?.name, "gw");
    assert.equal(conditionOf(ancestors[0]?.conditions, "Accepted")?.status, "True");
    assert.equal(conditionOf(ancestors[0]?.conditions, "Attached")?.observedGeneration, policy.metadata.generation);
    const backend = await waitForObject(
      admin,
      `${SLUICE}/namespaces/${ns}/gwbackends/llm`,
      "backend accepted",
      (o) => conditionOf(statusOf(o)["conditions"], "Accepted")?.status === "True",
    );
    assert.equal(conditionOf(statusOf(backend)["conditions"], "Accepted")?.reason, "Accepted");
  });

  test("a resource the API server accepts but Sluice refuses: status names the field, the rest keeps serving", async () => {
    await cluster.apply(`
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: broken, namespace: ${ns} }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: open }]
  traffic:
    authorization: { action: Allow, policy: { matchExpressions: ["request.path =="] } }
`);
    const broken = await waitForObject(admin, `${SLUICE}/namespaces/${ns}/gwpolicies/broken`, "refusal", (o) =>
      JSON.stringify(o["status"] ?? {}).includes("matchExpressions"),
    );
    assert.match(JSON.stringify(broken["status"]), /spec\.traffic\.authorization\.policy\.matchExpressions\[0\]/);
    // And an Event, what `kubectl describe` shows, naming the field.
    const event = await waitFor("the Event", async () => {
      const list = await admin.get<{ items: KubeObject[] }>(`/apis/events.k8s.io/v1/namespaces/${ns}/events`);
      return list.items.find((e) => (e["regarding"] as { name?: string } | undefined)?.name === "broken");
    });
    assert.equal(event["type"], "Warning");
    assert.equal(event["reason"], "Invalid");
    assert.equal(event["reportingController"], "sluice.dev/gateway-controller");
    assert.match(String(event["note"]), /spec\.traffic\.authorization\.policy\.matchExpressions\[0\]/);
    // Nothing else changed: the open rule is still open, the secure one still secured.
    assert.equal((await request(port, "/app")).status, 200);
    assert.equal((await request(port, "/secure")).status, 401);
  });

  test("authenticated xDS: no certificate gets nothing; Gateway A's certificate never gets B's config", async () => {
    // Gateway gw-b is served (its own Envoy gets it) ...
    const b = await gatewayEnvoy(admin, controller, ns, "gw-b");
    try {
      await waitFor("Gateway B to serve", async () => ((await request(portB, "/")).status === 200 ? true : undefined));
    } finally {
      await b.stop();
    }
    const refusedBefore = Number(/sluice_xds_refused_streams_total (\d+)/.exec(await metrics(controller))?.[1]);
    // ... but not to an Envoy without a certificate, nor to one with Gateway gw's certificate naming gw-b.
    const anonymous = await startTestEnvoy(controller, { gateway: `${ns}/gw-b`, ready: false });
    const impostor = await gatewayEnvoy(admin, controller, ns, "gw", { node: "gw-b", ready: false });
    try {
      await waitFor("the impostor's stream refused", async () => {
        const m = await metrics(controller);
        return Number(/sluice_xds_refused_streams_total (\d+)/.exec(m)?.[1]) > refusedBefore ? true : undefined;
      });
      await sleep(2000);
      for (const e of [anonymous, impostor]) {
        const dump = JSON.stringify(await e.configDump());
        assert.ok(!dump.includes(`"port_value":${portB}`), "no listener of Gateway B");
        assert.ok(!dump.includes("httproute/"), "no route of any Gateway");
      }
      const refusals = ((await controller.status())["xds"] as { refusals: { identity?: string; group?: string }[] })
        .refusals;
      assert.ok(
        refusals.some((r) => r.identity === `${ns}/gw` && r.group === `${ns}/gw-b`),
        JSON.stringify(refusals),
      );
    } finally {
      await anonymous.stop();
      await impostor.stop();
    }
  });

  test("validate, explain and status with --kubeconfig read the cluster", async () => {
    const run = async (args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await main(args, { stdout: (s) => out.push(s), stderr: (s) => err.push(s) });
      return { code, out: out.join(""), err: err.join("") };
    };
    const validate = await run(["validate", "--kubeconfig", cluster.adminKubeconfig]);
    assert.equal(validate.code, 1, validate.err);
    assert.match(
      validate.out,
      new RegExp(
        `^kubernetes: GwPolicy ${ns}/broken: spec\\.traffic\\.authorization\\.policy\\.matchExpressions\\[0\\]: `,
        "m",
      ),
    );
    const explain = await run(["explain", "--kubeconfig", cluster.adminKubeconfig, "--route", `${ns}/r/secure`]);
    assert.equal(explain.code, 0, explain.err);
    assert.match(explain.out, /jwtAuthentication/);
    assert.match(explain.out, new RegExp(`GwPolicy ${ns}/secure`));
    const status = await run(["status", "--kubeconfig", cluster.adminKubeconfig, "--output", "json"]);
    const doc = JSON.parse(status.out) as { resources: { kind: string; name: string; status: unknown }[] };
    // Problems first: the refused policy comes before the resources that are fine.
    const index = (kind: string, name: string) => doc.resources.findIndex((r) => r.kind === kind && r.name === name);
    assert.ok(index("GwPolicy", "broken") >= 0 && index("GwPolicy", "broken") < index("Gateway", "gw"));
    const gw = doc.resources.find((r) => r.kind === "Gateway" && r.name === "gw");
    assert.equal(conditionOf((gw?.status as { conditions?: unknown })?.conditions, "Programmed")?.status, "True");
  });

  test("a change through the API reaches Envoy", async () => {
    await cluster.apply(kubeRouteYaml(ns, "added"));
    await waitFor("the new route", async () => ((await request(port, "/added")).status === 200 ? true : undefined));
    const gw = await waitForObject(
      admin,
      `${GW}/namespaces/${ns}/gateways/gw`,
      "attachedRoutes 3",
      (o) => ((statusOf(o)["listeners"] as { attachedRoutes: number }[] | undefined)?.[0]?.attachedRoutes ?? 0) === 3,
    );
    assert.ok(gw);
  });

  test("a Secret no resource names is watched but not translated; once a policy names it, its keys work", async () => {
    type Kinds = Record<string, { objects: number; translated: number }>;
    const secrets = async () => ((await controller.status())["kube"] as { kinds: Kinds }).kinds["Secret"];
    const before = await secrets();
    assert.ok(before !== undefined);
    const unchanged = async () =>
      Number(/sluice_reloads_unchanged_total (\d+)/.exec(await metrics(controller))?.[1] ?? Number.NaN);
    const unchangedBefore = await unchanged();
    await cluster.apply(`apiVersion: v1
kind: Secret
metadata: { name: route-keys, namespace: ${ns} }
stringData: { first: key-one-0123456789 }
`);
    await waitFor("the Secret to be watched", async () =>
      ((await secrets())?.objects ?? 0) > before.objects ? true : undefined,
    );
    // Nothing names it: held by the watch, left out of translation (a change of it costs no translation).
    assert.equal((await secrets())?.translated, before.translated);
    // Its event was taken in without a translation (a reload running then takes it a little later).
    await waitFor("a reload that changed nothing", async () =>
      (await unchanged()) > unchangedBefore ? true : undefined,
    );
    await cluster.apply(`${kubeRouteYaml(ns, "keyed")}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: keyed, namespace: ${ns} }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: keyed }]
  traffic:
    apiKeyAuthentication: { secretRef: { name: route-keys } }
`);
    await waitFor("the key to be required", async () =>
      (await request(port, "/keyed")).status === 401 ? true : undefined,
    );
    const keyed = await request(port, "/keyed", { headers: { authorization: "Bearer key-one-0123456789" } });
    assert.equal(keyed.status, 200, keyed.body);
    assert.equal((await secrets())?.translated, before.translated + 1);
  });
});

async function metrics(p: SluiceProcess): Promise<string> {
  return (await fetch(`http://127.0.0.1:${p.adminPort}/metrics`)).text();
}

function statusOf(o: KubeObject): Record<string, unknown> {
  return (o["status"] ?? {}) as Record<string, unknown>;
}

function parentsOf(o: KubeObject): { parentRef: unknown; controllerName: string; conditions: unknown }[] {
  return (statusOf(o)["parents"] ?? []) as { parentRef: unknown; controllerName: string; conditions: unknown }[];
}

function ancestorsOf(o: KubeObject): { ancestorRef: unknown; controllerName: string; conditions: unknown }[] {
  return (statusOf(o)["ancestors"] ?? []) as { ancestorRef: unknown; controllerName: string; conditions: unknown }[];
}

function managers(o: KubeObject): string[] {
  return ((o.metadata["managedFields"] ?? []) as { manager: string }[]).map((m) => m.manager);
}
