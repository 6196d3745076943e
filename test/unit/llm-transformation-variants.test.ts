// AI cluster variants per route transformation (xds/llm-transformation.ts), and the per-provider, per-attempt
// transformation the upstream processor serves (extproc/transformation.ts): names stable, one variant per distinct
// transformation, a provider's own entries picked by the attempt's provider, the previous attempt undone.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import type { ExtProcRequest, Reply } from "../../src/extproc/llm/wire.js";
import {
  type AttemptJournal,
  PROVIDER_ATTRIBUTE,
  serveTransformation,
  type TransformationCall,
  type TransformationSpec,
} from "../../src/extproc/transformation.js";
import { clusterVariantBase } from "../../src/translate/names.js";

const GATEWAY = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: one, providerA: {}, host: api.example.com }]
      - providers: [{ name: two, providerD: {}, host: api.example.org }]
`;

function rule(name: string): string {
  return `    - name: ${name}
      matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
`;
}

function policy(name: string, rules: readonly string[], value: string): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [${rules.map((r) => `{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: ${r} }`).join(", ")}]
  backend:
    transformation:
      request:
        set: [{ name: x-team, value: "'${value}'" }]
`;
}

/** The AI clusters of a translation and the cluster each route goes to. */
async function clustersOf(yaml: string): Promise<{ clusters: string[]; routes: Map<string, string> }> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-llm-variants-"));
  try {
    const file = join(dir, "in.yaml");
    writeFileSync(file, yaml);
    const { load, result } = await loadAndTranslate([file]);
    assert.deepEqual(load.problems, []);
    const gw = result.gateways[0];
    assert.ok(gw !== undefined);
    const clusters = gw.xds.clusters.map((c) => c.name).filter((n) => n.startsWith("backend/default/llm"));
    const routes = new Map<string, string>();
    for (const rc of gw.xds.routes) {
      for (const vh of rc.virtualHosts) {
        for (const r of vh.routes) {
          if (r.action.case === "route" && r.action.value.clusterSpecifier.case === "cluster") {
            routes.set(r.name, r.action.value.clusterSpecifier.value);
          }
        }
      }
    }
    return { clusters: clusters.sort(), routes };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const route = (rules: readonly string[]) => `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${rules.map(rule).join("")}`;

test("one variant per distinct route transformation, named by its content", async () => {
  const two = await clustersOf(
    GATEWAY + route(["a", "b", "none"]) + policy("pa", ["a"], "a") + policy("pb", ["b"], "b"),
  );
  assert.equal(two.clusters.length, 3);
  assert.ok(two.clusters.includes("backend/default/llm"));
  const a = two.routes.get("httproute/default/r/rule/0/match/0");
  const b = two.routes.get("httproute/default/r/rule/1/match/0");
  assert.equal(two.routes.get("httproute/default/r/rule/2/match/0"), "backend/default/llm");
  assert.match(a ?? "", /^backend\/default\/llm~[0-9a-f]{10}$/);
  assert.match(b ?? "", /^backend\/default\/llm~[0-9a-f]{10}$/);
  assert.notEqual(a, b);
  assert.equal(clusterVariantBase(a ?? ""), "backend/default/llm");

  // A fourth route with team a's transformation shares its variant; the names do not move.
  const more = await clustersOf(
    GATEWAY + route(["a", "b", "none", "a2"]) + policy("pa", ["a", "a2"], "a") + policy("pb", ["b"], "b"),
  );
  assert.deepEqual(more.clusters, two.clusters);
  assert.equal(more.routes.get("httproute/default/r/rule/0/match/0"), a);
  assert.equal(more.routes.get("httproute/default/r/rule/3/match/0"), a);
  assert.equal(more.routes.get("httproute/default/r/rule/1/match/0"), b);

  // Every route agreeing: no variant.
  const none = await clustersOf(GATEWAY + route(["a", "b"]) + policy("p", ["a", "b"], "same"));
  assert.equal(none.clusters.length, 2);
  assert.equal(new Set(none.routes.values()).size, 1);
});

/** A transformation stream fed `messages`; what it answered. */
function run(
  spec: TransformationSpec,
  messages: ExtProcRequest[],
  attempt?: Parameters<typeof serveTransformation>[3],
): Reply[] {
  const out: Reply[] = [];
  const on: Record<string, (x?: unknown) => void> = {};
  const call: TransformationCall = {
    on: ((event: string, fn: (x?: unknown) => void) => {
      on[event] = fn;
    }) as TransformationCall["on"],
    write: (r) => out.push(r),
    end: () => {},
  };
  serveTransformation(call, spec, () => {}, attempt);
  for (const m of messages) on.data?.(m);
  return out;
}

const enc = new TextEncoder();
function headers(h: Record<string, string>, provider?: string): ExtProcRequest {
  return {
    request: {
      case: "requestHeaders",
      value: {
        headers: { headers: Object.entries(h).map(([key, v]) => ({ key, value: "", rawValue: enc.encode(v) })) },
        endOfStream: true,
      },
    },
    attributes: provider === undefined ? {} : { "envoy.filters.http.ext_proc": { [PROVIDER_ATTRIBUTE]: provider } },
  };
}

const SPEC: TransformationSpec = {
  entries: [{ request: { set: [{ name: "x-common", value: "'backend'" }] } }],
  providers: {
    one: [
      {
        request: {
          set: [
            { name: "x-who", value: "'one'" },
            { name: "x-api-key", value: "'k'" },
          ],
          add: [{ name: "x-tag", value: "'t'" }],
        },
      },
    ],
    constructor: [{ request: { remove: ["x-who"] } }],
  },
  llm: true,
  requestBody: false,
  responseBody: false,
};

test("a provider's own entries are picked by the attempt's provider; others get the backend's", () => {
  const [one] = run(SPEC, [headers({ ":path": "/v1/chat/completions" }, "one")]);
  assert.equal(one?.phase, "requestHeaders");
  assert.deepEqual(one && "headers" in one ? one.headers : undefined, {
    set: { "x-who": "one", "x-api-key": "k" },
    add: [["x-tag", "t"]],
  });
  const [two] = run(SPEC, [headers({}, "two")]);
  assert.deepEqual(two && "headers" in two ? two.headers : undefined, { set: { "x-common": "backend" } });
  // Own keys only: a provider named like an Object property.
  const [c] = run(SPEC, [headers({ "x-who": "client" }, "constructor")]);
  assert.deepEqual(c && "headers" in c ? c.headers : undefined, { set: {}, remove: ["x-who"] });
  const [none] = run(SPEC, [headers({})]);
  assert.deepEqual(none && "headers" in none ? none.headers : undefined, { set: { "x-common": "backend" } });
});

test("each attempt undoes the previous attempt's header changes, but not the LLM stage's own", () => {
  const journal: AttemptJournal = new Map();
  let provided = new Set<string>();
  const attempt = () => ({ journal, provided });
  // Attempt 1, provider one: the client sent x-who and x-tag.
  const [first] = run(
    SPEC,
    [headers({ "x-who": "client", "x-tag": "c", authorization: "Bearer one" }, "one")],
    attempt,
  );
  assert.deepEqual(first && "headers" in first ? first.headers : undefined, {
    set: { "x-who": "one", "x-api-key": "k" },
    add: [["x-tag", "t"]],
  });
  // Attempt 2, provider two: Envoy's header map still holds attempt 1's changes; the LLM stage set authorization and
  // x-api-key (its credential, here the value attempt 1 wrote) anew: those are left as they are.
  provided = new Set(["authorization", "x-api-key"]);
  const [second] = run(
    SPEC,
    [headers({ "x-who": "one", "x-tag": "c,t", "x-api-key": "k", authorization: "Bearer two" }, "two")],
    attempt,
  );
  assert.deepEqual(second && "headers" in second ? second.headers : undefined, {
    set: { "x-who": "client", "x-tag": "c", "x-common": "backend" },
  });
  // Attempt 3, provider one again: x-common (written by attempt 2, absent before) is removed; one's own applies to
  // the headers as the client sent them (x-tag appended once).
  provided = new Set();
  const [third] = run(
    SPEC,
    [headers({ "x-who": "client", "x-tag": "c", "x-common": "backend", authorization: "Bearer one" }, "one")],
    attempt,
  );
  assert.deepEqual(third && "headers" in third ? third.headers : undefined, {
    set: { "x-who": "one", "x-api-key": "k" },
    add: [["x-tag", "t"]],
    remove: ["x-common"],
  });
  // Without `llm` (a Service's transformation) nothing is looked up.
  let asked = false;
  run({ ...SPEC, llm: false }, [headers({}, "one")], () => {
    asked = true;
    return { journal, provided };
  });
  assert.equal(asked, false);
});
