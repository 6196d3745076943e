// examples/kubernetes: what its README has a user run before applying — `sluice validate` on resources/ — passes;
// the resources translate as the controller would, every condition fine; and a real kube-apiserver, with Sluice's and
// the Gateway API's (standard channel) CRDs installed, accepts every manifest of the example in a server-side dry run.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { main } from "../../src/cli/main.js";
import { projectRoot } from "../../src/cli/paths.js";
import { type KubeCluster, startKubeCluster, yamlObjects } from "../helpers/kube.js";

const DIR = join(projectRoot(), "examples", "kubernetes");
const files = (sub: string) =>
  readdirSync(join(DIR, sub))
    .filter((f) => f.endsWith(".yaml"))
    .sort()
    .map((f) => join(DIR, sub, f));

async function sluice(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await main(args, { stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

test("sluice validate -f examples/kubernetes/resources: no problem", async () => {
  const r = await sluice(["validate", "-f", join(DIR, "resources")]);
  assert.equal(r.code, 0, r.out + r.err);
  assert.match(r.out + r.err, /(\d+) documents: \1 valid, 0 errors, 0 warnings/);
});

test("the resources translate with every condition fine (the route's Service resolves, the policy attaches)", async () => {
  const r = await sluice(["status", "-f", join(DIR, "resources"), "-o", "json"]);
  assert.equal(r.code, 0, r.err);
  const doc = JSON.parse(r.out) as { problems: string[]; resources: { kind: string; name: string; status: unknown }[] };
  assert.deepEqual(doc.problems, []);
  const conditions = (v: unknown): { type: string; status: string }[] =>
    Array.isArray(v)
      ? v.flatMap(conditions)
      : typeof v === "object" && v !== null
        ? "type" in v && "status" in v
          ? [v as { type: string; status: string }]
          : Object.values(v).flatMap(conditions)
        : [];
  const kinds = doc.resources.map((x) => x.kind).sort();
  assert.deepEqual(kinds, ["Gateway", "GwPolicy", "HTTPRoute"]);
  for (const res of doc.resources) {
    const cs = conditions(res.status);
    assert.ok(cs.length > 0, `${res.kind} ${res.name} has no condition`);
    for (const c of cs)
      assert.ok(c.status === "True" && c.type !== "Warning", `${res.kind} ${res.name}: ${JSON.stringify(c)}`);
  }
});

let cluster: KubeCluster;
before(async () => {
  cluster = await startKubeCluster();
  await cluster.installCrds({ gatewayApiChannel: "standard" });
});
after(async () => {
  await cluster?.stop();
});

test("a real kube-apiserver accepts every manifest of the example (server-side apply, dry run)", async () => {
  const namespace = files("resources").filter((f) => f.endsWith("namespace.yaml"));
  assert.equal(namespace.length, 1);
  // The namespace for real (the others are namespaced in it), then everything else as a dry run.
  await cluster.apply(readFileSync(namespace[0] ?? "", "utf8"));
  const rest = [...files("resources"), ...files("app")].filter((f) => !f.endsWith("namespace.yaml"));
  const docs = rest.flatMap((f) => yamlObjects(readFileSync(f, "utf8")));
  assert.deepEqual(docs.map((d) => d.kind).sort(), [
    "Deployment",
    "Gateway",
    "GwParameters",
    "GwPolicy",
    "HTTPRoute",
    "Secret",
    "Service",
  ]);
  await cluster.apply(docs, "examples-test", { dryRun: true });
  // A dry run stores nothing.
  const r = await cluster.request("GET", "/apis/gateway.networking.k8s.io/v1/namespaces/shop/gateways/web");
  assert.equal(r.status, 404);
  // And the API server does refuse what is wrong: the same Gateway with a listener port out of range.
  const gateway = docs.find((d) => d.kind === "Gateway") as unknown as { spec: { listeners: { port: number }[] } };
  const broken = structuredClone(gateway);
  (broken.spec.listeners[0] as { port: number }).port = 70000;
  await assert.rejects(cluster.apply([broken], "examples-test", { dryRun: true }), /port/);
});
