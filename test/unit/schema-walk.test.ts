// The guard against the next silent drop (issue 22): every field of the GwPolicy and GwBackend schemas must reach
// something. For each leaf field, a minimal resource with the field set is translated beside the same resource
// without it (or with another value, where the field is required or one of an exactly-one group), in every context
// the field is valid in (a frontend policy on the Gateway, a traffic policy on a route, a backend policy on a Service,
// an AI GwBackend and an MCP GwBackend; a GwBackend's own fields on a static and an AI backend). The field reaches
// something when the two translations differ in the xDS, the ext_authz policy table, the LLM table or the MCP table,
// or when a status message names the field or an enclosing field (a section reported whole). Values come from the
// schema itself (enums, bounds, patterns, defaults); SAMPLES gives the few a schema cannot say, and ALLOWED lists,
// with the reason, the fields that are pure selectors or metadata. A field that reaches nothing fails here. The method
// is in test/helpers/schema-walk.ts (shared with gw-model-walk.test.ts).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { GwBackendSpec } from "../../src/api/backend.js";
import { GwPolicySpec } from "../../src/api/policy.js";
import { type Context, doc, type Json, probeSecrets, schemaWalker, unexpected } from "../helpers/schema-walk.js";

// ---- values ----

/** Values a schema cannot say (a CEL expression of the right type, a JWKS, a matching reference ...), by path. */
const SAMPLES: Record<string, [Json, Json]> = {
  "traffic.jwtAuthentication.providers[].jwks.inline": [
    JSON.stringify({ keys: [{ kty: "oct", kid: "a", k: "c2VjcmV0LWEtc2VjcmV0LWEtc2VjcmV0LWE", alg: "HS256" }] }),
    JSON.stringify({ keys: [{ kty: "oct", kid: "b", k: "c2VjcmV0LWItc2VjcmV0LWItc2VjcmV0LWI", alg: "HS256" }] }),
  ],
  "frontend.tracing.randomSampling": ["0.5", "true"],
  "frontend.tracing.clientSampling": ["0.5", "true"],
  "traffic.delay.duration": ["'2s'", "'3s'"],
  // Names of the default access log fields (a name that is not one removes nothing).
  "attributes.remove": [["method"], ["path"]],
  "traffic.extAuth.cache.ttl": ["'5s'", "'7s'"],
  "traffic.rateLimit.global.descriptors[].cost": ["2", "3"],
  "custom.backendRef.kind": ["InferencePool", "Service"],
  // Foundry first: projectName is refused beside OpenAI, and a probe cannot change a required field.
  "cloudC.resourceType": ["Foundry", "OpenAI"],
  // The group each of those kinds is in (the schema refuses another).
  "custom.backendRef.group": ["inference.networking.k8s.io", ""],
  // A credential to place: location and credentials mean something only beside one.
  auth: [{ key: "k-a" }, { key: "k-b" }],
  // Something for phase and strategy to act on: PreRouting request headers run before routing.
  traffic: [{ headerModifiers: { request: { set: [{ name: "x-probe", value: "1" }] } } }, {}],
  // A provider reached on a local port (custom without backendRef needs host and port; the others take them too).
  "ai.provider": [
    { providerA: {}, host: "127.0.0.1", port: 9 },
    { providerA: {}, host: "127.0.0.2", port: 9 },
  ],
  "ai.groups[].providers[]": [
    { name: "p1", providerA: {}, host: "127.0.0.1", port: 9 },
    { name: "p2", providerA: {}, host: "127.0.0.2", port: 9 },
  ],
  // A label selector's expression that selects something: key, operator and values each change what it selects.
  ...Object.fromEntries(
    ["selector.namespaces", "selector.services"].map((s) => [
      `${s}.matchExpressions[]`,
      [
        { key: "probe-a", operator: "In", values: ["probe-a"] },
        { key: "probe-b", operator: "In", values: ["probe-b"] },
      ],
    ]),
  ),
  "assumeRole.roleArn": ["arn:aws:iam::123456789012:role/a", "arn:aws:iam::123456789012:role/b"],
  // Agent runtime ARNs and qualifiers match the schema's patterns, which the walker cannot sample.
  "agentCore.agentRuntimeArn": [
    "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/a",
    "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/b",
  ],
  "agentCore.qualifier": ["prod", "v2"],
};

// ---- the world each probe is translated in ----

const GW = "gateway.networking.k8s.io";
const route = (name: string, path: string, ref: Record<string, Json>) =>
  doc(`${GW}/v1`, "HTTPRoute", name, {
    parentRefs: [{ name: "gw" }],
    rules: [{ matches: [{ path: { type: "PathPrefix", value: path } }], backendRefs: [ref] }],
  });
const gwBackendRef = (name: string) => ({ group: "sluice.dev", kind: "GwBackend", name });

/** Everything a probe may refer to: Services, Secrets and ConfigMaps under the names the samples use. */
const WORLD: Json[] = [
  doc(`${GW}/v1`, "Gateway", "gw", {
    gatewayClassName: "sluice",
    listeners: [
      { name: "http", protocol: "HTTP", port: 8080 },
      { name: "https", protocol: "HTTPS", port: 8443, tls: { certificateRefs: [{ name: "cert" }] } },
    ],
  }),
  route("r-svc", "/svc", { name: "svc", port: 80 }),
  route("r-ai", "/ai", gwBackendRef("ai")),
  route("r-mcp", "/mcp", gwBackendRef("mcp")),
  route("r-static", "/static", gwBackendRef("static")),
  // Labels a label selector (an MCP target's) can tell apart: the namespace default and the Service probe-a carry
  // probe-a, probe-b carries probe-b, and the namespace other (no labels) has a Service too.
  { apiVersion: "v1", kind: "Namespace", metadata: { name: "default", labels: { "probe-a": "probe-a" } } },
  { apiVersion: "v1", kind: "Namespace", metadata: { name: "other" } },
  doc("v1", "Service", "svc", { ports: [{ port: 80 }] }),
  doc(
    "v1",
    "Service",
    "probe-a",
    { ports: [{ port: 3 }, { port: 2 }, { port: 80 }] },
    {
      metadata: { name: "probe-a", namespace: "default", labels: { "probe-a": "probe-a" } },
    },
  ),
  doc(
    "v1",
    "Service",
    "probe-b",
    { ports: [{ port: 4 }, { port: 3 }, { port: 80 }] },
    {
      metadata: { name: "probe-b", namespace: "default", labels: { "probe-b": "probe-b" } },
    },
  ),
  { ...doc("v1", "Service", "svc", { ports: [{ port: 80 }] }), metadata: { name: "svc", namespace: "other" } },
  ...(
    [
      ["svc", "default"],
      ["probe-a", "default"],
      ["probe-b", "default"],
      ["svc", "other"],
    ] as const
  ).map(([svc, namespace], i) =>
    doc("discovery.k8s.io/v1", "EndpointSlice", `${svc}-1`, undefined, {
      metadata: { name: `${svc}-1`, namespace, labels: { "kubernetes.io/service-name": svc } },
      addressType: "IPv4",
      endpoints: [{ addresses: [`127.0.0.${i + 1}`] }],
      ports: [{ port: 9 }],
    }),
  ),
  ...probeSecrets([
    ["probe-a", "example.com"],
    ["probe-b", "foo.example.com"],
    ["cert", "example.com"],
  ]),
  doc("sluice.dev/v1alpha1", "GwBackend", "static", { static: { host: "127.0.0.1", port: 9 } }),
  doc("sluice.dev/v1alpha1", "GwBackend", "mcp", {
    mcp: { targets: [{ name: "t", static: { host: "127.0.0.1", port: 9 } }] },
  }),
];
const AI_BACKEND = { ai: { provider: { providerA: {}, host: "127.0.0.1", port: 9 } } };

const policy = (target: Record<string, Json>): Context => ({
  name: `${target.kind} ${target.name}`,
  base: { targetRefs: [target] },
  docs: (spec) => [
    ...WORLD,
    doc("sluice.dev/v1alpha1", "GwBackend", "ai", AI_BACKEND),
    doc("sluice.dev/v1alpha1", "GwPolicy", "probe", spec),
  ],
});

/**
 * Fields that reach nothing by design, each with why. Only selectors (which objects a policy applies to; the walk
 * itself sets them to reach its targets) and metadata belong here.
 */
const ALLOWED: Record<string, string> = {
  targetRefs: "selector: which objects the policy attaches to",
  targetSelectors: "selector: which objects the policy attaches to",
  "strategy.inheritance":
    "merge metadata between policies: one policy alone shows nothing; test/golden/policy/override-excludes-more-specific",
};

const POLICY_CONTEXTS = {
  frontend: [policy({ group: GW, kind: "Gateway", name: "gw" })],
  traffic: [
    policy({ group: GW, kind: "HTTPRoute", name: "r-svc" }),
    policy({ group: GW, kind: "HTTPRoute", name: "r-ai" }),
    policy({ group: GW, kind: "Gateway", name: "gw" }),
  ],
  backend: [
    policy({ group: "", kind: "Service", name: "svc" }),
    policy({ group: "sluice.dev", kind: "GwBackend", name: "ai" }),
    policy({ group: "sluice.dev", kind: "GwBackend", name: "mcp" }),
    policy({ group: "sluice.dev", kind: "GwBackend", name: "static" }),
  ],
};

const backendContext = (name: string, base: Record<string, Json>): Context => ({
  name,
  base,
  docs: (spec) => [
    ...WORLD.filter(
      (d) =>
        (d as { kind: string; metadata: { name: string } }).metadata.name !== "static" ||
        (d as { kind: string }).kind !== "GwBackend",
    ),
    doc("sluice.dev/v1alpha1", "GwBackend", "static", spec),
    doc("sluice.dev/v1alpha1", "GwBackend", "ai", AI_BACKEND),
  ],
});

/**
 * Drops found and not fixed yet, each with why: the list issue 22 still has to close. A field leaving this list is
 * progress (the test then says which entry to remove); a new drop fails.
 */
const KNOWN: readonly (readonly [RegExp, string])[] = [];

const { walk } = schemaWalker({ samples: SAMPLES, world: WORLD, allowed: ALLOWED });

describe("every schema field reaches the xDS, a Sluice table or a status", () => {
  for (const section of ["frontend", "traffic", "backend"] as const) {
    test(`GwPolicy spec.${section}`, () => {
      const drops = walk(GwPolicySpec, [section], POLICY_CONTEXTS[section], [""]);
      assert.deepEqual(unexpected(drops, KNOWN), []);
    });
  }
  test("GwPolicy selectors and strategy are allowed, with reasons", () => {
    const drops = walk(
      GwPolicySpec,
      ["strategy", "targetRefs", "targetSelectors"],
      [POLICY_CONTEXTS.traffic[0] as Context],
      [""],
    );
    assert.deepEqual(drops, []);
  });
  test("GwBackend spec (variants, and its own policies on static and AI backends)", () => {
    const contexts = [
      backendContext("static GwBackend", { static: { host: "127.0.0.1", port: 9 } }),
      backendContext("AI GwBackend", AI_BACKEND),
      // promptCaching is for providerG alone.
      backendContext("providerG GwBackend", { ai: { provider: { providerG: {}, host: "127.0.0.1", port: 9 } } }),
      backendContext("MCP GwBackend", { mcp: { targets: [{ name: "t", static: { host: "127.0.0.1", port: 9 } }] } }),
    ];
    const variants = ["static", "ai", "mcp", "a2a", "cloudA", "dynamicForwardProxy"];
    const drops = [
      ...walk(GwBackendSpec, variants, contexts.slice(0, 1), ["spec."]),
      ...walk(GwBackendSpec, ["policies"], contexts, ["spec."]),
    ];
    assert.deepEqual(unexpected(drops, KNOWN), []);
  });
});
