// Issue 18: no silent drops in GwModel. Every leaf field of the GwModel schema must reach something: a minimal GwModel
// with the field set is translated beside the same GwModel without it (or with another value, where it is required or
// one of an exactly-one group), and the field reaches something when the xDS or the LLM table differ, or when the
// model's status names the field or an enclosing field (`spec.policies.tls: ...`). Concrete models are probed with
// each provider enumeration value (the settings of Provider02, 05, 06 and Custom with their provider), virtual models
// over two concrete targets. The method is test/helpers/schema-walk.ts (shared with schema-walk.test.ts for GwPolicy
// and GwBackend); SAMPLES gives the values a schema cannot say, ALLOWED the pure selectors, each with why.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { GwModelSpec, MODEL_PROVIDERS } from "../../src/api/model.js";
import { type Context, doc, type Json, named, probeSecrets, schemaWalker, unexpected } from "../helpers/schema-walk.js";

// ---- values ----

const SAMPLES: Record<string, [Json, Json]> = {
  // A credential to place: location and credentials mean something only beside one.
  "policies.auth": [{ key: "k-a" }, { key: "k-b" }],
  "policies.health.unhealthyCondition": ["response.code == 500", "response.code == 503"],
  baseURL: ["http://127.0.0.1:7", "http://127.0.0.2:7"],
  // A custom provider's Service, or an InferencePool of the same name (GwBackends are not valid here).
  "custom.backendRef.kind": ["InferencePool", "Service"],
  // The group each of those kinds is in (the schema refuses another).
  "custom.backendRef.group": ["inference.networking.k8s.io", ""],
  "match.model": ["probe-a-*", "*-latest"],
  "assumeRole.roleArn": ["arn:aws:iam::123456789012:role/a", "arn:aws:iam::123456789012:role/b"],
  // The Gateway, and one that does not exist (both missing would differ in nothing).
  "parentRefs[].name": ["gw", "missing"],
};

// ---- the world each probe is translated in ----

const GW = "gateway.networking.k8s.io";
const MODEL = "sluice.dev/v1alpha1";

/** The Gateway, the concrete models a virtual model may target, and the Services, Secrets and ConfigMaps samples name. */
const WORLD: Json[] = [
  doc(`${GW}/v1`, "Gateway", "gw", {
    gatewayClassName: "sluice",
    listeners: [
      { name: "http", protocol: "HTTP", port: 8080 },
      { name: "api", protocol: "HTTP", port: 8081 },
    ],
  }),
  ...["probe-a", "probe-b"].map((name, i) =>
    doc(MODEL, "GwModel", name, {
      parentRefs: [{ name: "gw" }],
      provider: "Provider01",
      baseURL: `http://127.0.0.${i + 1}:9`,
      visibility: "Internal",
    }),
  ),
  doc("v1", "Service", "svc", { ports: [{ port: 80 }] }),
  doc("v1", "Service", "probe-a", { ports: [{ port: 3 }, { port: 2 }, { port: 80 }] }),
  doc("v1", "Service", "probe-b", { ports: [{ port: 4 }, { port: 3 }, { port: 80 }] }),
  ...["svc", "probe-a", "probe-b"].map((svc, i) =>
    doc("discovery.k8s.io/v1", "EndpointSlice", `${svc}-1`, undefined, {
      metadata: { name: `${svc}-1`, namespace: "default", labels: { "kubernetes.io/service-name": svc } },
      addressType: "IPv4",
      endpoints: [{ addresses: [`127.0.0.${i + 1}`] }],
      ports: [{ port: 9 }],
    }),
  ),
  ...probeSecrets([
    ["probe-a", "example.com"],
    ["probe-b", "foo.example.com"],
  ]),
];

/** A GwModel named `probe` with the spec probed, beside the world's. */
const modelContext = (name: string, base: Record<string, Json>): Context => ({
  name,
  base,
  docs: (spec) => [...WORLD, doc(MODEL, "GwModel", "probe", spec)],
});

const PARENT = { parentRefs: [{ name: "gw" }] };
/** Settings a provider cannot go without (the schema's rules and translate/model/providers.ts). */
const PROVIDER_SETTINGS: Record<string, Record<string, Json>> = {
  // Foundry, so that projectName has something to act on (the schema refuses it beside OpenAI).
  Provider02: { cloudC: { resourceName: "r", resourceType: "Foundry", projectName: "p" } },
  Provider05: { providerF: { projectId: "p" } },
  Custom: { custom: { formats: [{ type: "Completions" }] } },
};
const concrete = (provider: string) =>
  modelContext(`concrete model, ${provider}`, {
    ...PARENT,
    provider,
    baseURL: "http://127.0.0.1:9",
    ...(PROVIDER_SETTINGS[provider] ?? {}),
  });
const VIRTUAL = modelContext("virtual model", {
  ...PARENT,
  virtualModel: { weighted: { targets: [{ modelRef: { name: "probe-a" } }, { modelRef: { name: "probe-b" } }] } },
});

/** Fields that reach nothing by design, each with why: only selectors and metadata belong here. */
const ALLOWED: Record<string, string> = {};

/** Drops found and not fixed yet, each with why: none (a field added without effect fails here). */
const KNOWN: readonly (readonly [RegExp, string])[] = [];

const { translateDocs, walk } = schemaWalker({ samples: SAMPLES, world: WORLD, allowed: ALLOWED });

/** The settings field each provider takes (the schema refuses it with any other provider). */
const SETTINGS_OF: Record<string, string> = {
  Provider02: "cloudC",
  Provider05: "providerF",
  Provider06: "providerG",
  Custom: "custom",
};

describe("every GwModel field reaches the xDS, the LLM table or the model's status", () => {
  test("each provider is served (a distinct LLM entry or cluster) or reported under spec.provider", () => {
    const seen = new Map<string, string>();
    const failures: string[] = [];
    for (const p of MODEL_PROVIDERS) {
      const ctx = concrete(p);
      const out = translateDocs(ctx.docs(ctx.base));
      assert.ok(out.output, `${p}: ${out.problems}`);
      if (named(out.output.statuses, "provider", ["spec."], 1)) continue;
      const same = seen.get(out.output.reach);
      if (same !== undefined) failures.push(`${p} translates exactly as ${same}`);
      seen.set(out.output.reach, p);
    }
    assert.deepEqual(failures, []);
  });
  for (const p of MODEL_PROVIDERS) {
    test(`concrete model with ${p}: its provider's settings, baseURL, match, visibility, parentRefs, policies`, () => {
      const settings = SETTINGS_OF[p];
      // Policies, match, visibility and parentRefs are the same code whatever the provider: walked with Provider01
      // and Provider03 (another API) only.
      const all = p === "Provider01" || p === "Provider03";
      const own = [
        "baseURL",
        ...(settings !== undefined ? [settings] : []),
        ...(all ? ["match", "visibility", "parentRefs", "policies"] : []),
      ];
      assert.deepEqual(unexpected(walk(GwModelSpec, own, [concrete(p)], ["spec."]), KNOWN), []);
    });
  }
  test("virtual model: every strategy and target field, and the policies a virtual model takes", () => {
    assert.deepEqual(
      unexpected(walk(GwModelSpec, ["virtualModel", "match", "visibility", "policies"], [VIRTUAL], ["spec."]), KNOWN),
      [],
    );
  });
});
