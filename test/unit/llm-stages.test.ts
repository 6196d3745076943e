// One ext_proc stage or two for routes to AI backends (src/translate/llm/stages.ts): which routes the router-level
// stage serves alone (their LLM table entry names the one provider) and which clusters keep the upstream ext_proc.

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import type { TranslationResult } from "../../src/translate/translate.js";
import { xdsToJson } from "../../src/translate/xds/json.js";
import { gatewayYaml, rulePolicy } from "../helpers/gateway.js";
import { goldenDir } from "../helpers/golden.js";
import { tempConfigDir } from "../helpers/processes.js";

/** By rule name: the entry's one provider (`cluster provider`), or `two stages`. */
function stages(result: TranslationResult): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, id] of result.llm.routes) {
    const rule = /rule\/(\d+)\//.exec(key)?.[1];
    const single = result.llm.entries.get(id)?.single;
    out[rule ?? key] = single === undefined ? "two stages" : `${single.cluster} ${single.provider}`;
  }
  return out;
}

/** The AI clusters that have the upstream LLM ext_proc filter. */
function upstreamClusters(result: TranslationResult): string[] {
  const gw = result.gateways[0];
  return (gw === undefined ? [] : xdsToJson(gw.xds).clusters)
    .filter((c) => JSON.stringify(c).includes("sluice.llm_upstream_ext_proc"))
    .map((c) => String((c as { name?: unknown }).name))
    .sort();
}

async function translateYaml(yaml: string): Promise<TranslationResult> {
  const cfg = tempConfigDir();
  try {
    cfg.write("config.yaml", yaml);
    return (await loadAndTranslate([cfg.dir])).result;
  } finally {
    cfg.cleanup();
  }
}

test("one provider → one stage; several providers, or several backends by weight → two", async () => {
  const { result } = await loadAndTranslate([join(goldenDir("translate"), "llm-stages.in.yaml")]);
  assert.deepEqual(stages(result), {
    "0": "backend/default/solo default",
    "1": "backend/default/one-group only",
    "2": "two stages",
    "3": "two stages",
    "4": "backend/default/solo default",
    "5": "backend/default/shared default",
    "6": "two stages",
  });
  assert.deepEqual(upstreamClusters(result), [
    "backend/default/fleet",
    "backend/default/left",
    "backend/default/right",
    "backend/default/shared",
  ]);
});

const BASE = `${gatewayYaml(8080)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: solo, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: 8001 }
---
apiVersion: v1
kind: Service
metadata: { name: shadow, namespace: default }
spec: { ports: [{ port: 80 }] }
---
apiVersion: v1
kind: Service
metadata: { name: rls, namespace: default }
spec: { ports: [{ name: grpc, port: 8081, appProtocol: kubernetes.io/h2c }] }
`;

function route(filters = "", ref = ""): string {
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: main
${filters}      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: solo${ref} }]
`;
}

const policy = (traffic: string) => rulePolicy("main", traffic);
const tokens = (expression: string) =>
  policy(`rateLimit:
  global:
    backendRef: { name: rls, port: 8081 }
    domain: llm
    descriptors: [{ entries: [{ name: k, expression: "${expression}" }], unit: Tokens }]`);

test("what Envoy does to the request after the router-level stage keeps a single provider in two stages", async () => {
  const cases: [string, string, boolean][] = [
    ["nothing after it", route(), true],
    [
      "a response header modifier",
      route() + policy("headerModifiers: { response: { set: [{ name: x, value: y }] } }"),
      true,
    ],
    ["a token limit keyed on llm.requestModel", route() + tokens("llm.requestModel"), true],
    [
      "a RequestMirror (the copy would carry the provider's credentials)",
      route("      filters: [{ type: RequestMirror, requestMirror: { backendRef: { name: shadow, port: 80 } } }]\n"),
      false,
    ],
    [
      "a URLRewrite of the path",
      route(
        "      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]\n",
      ),
      false,
    ],
    [
      "a rule RequestHeaderModifier",
      route(
        "      filters: [{ type: RequestHeaderModifier, requestHeaderModifier: { set: [{ name: authorization, value: x }] } }]\n",
      ),
      false,
    ],
    [
      "a backendRef RequestHeaderModifier",
      route("", ", filters: [{ type: RequestHeaderModifier, requestHeaderModifier: { remove: [accept-encoding] } }]"),
      false,
    ],
    [
      "a request header modifier policy",
      route() + policy("headerModifiers: { request: { remove: [x-api-key] } }"),
      false,
    ],
    ["hostRewrite Auto", route() + policy("hostRewrite: { mode: Auto }"), false],
    ["csrf (compares the Origin with the Host)", route() + policy("csrf: {}"), false],
    ["a token limit keyed on a request header", route() + tokens("request.headers['authorization']"), false],
  ];
  for (const [what, yaml, single] of cases) {
    const result = await translateYaml(BASE + yaml);
    assert.deepEqual(
      stages(result),
      { "0": single ? "backend/default/solo default" : "two stages" },
      `${what}: ${single ? "one stage" : "two stages"} expected`,
    );
    assert.deepEqual(upstreamClusters(result), single ? [] : ["backend/default/solo"], what);
  }
});
