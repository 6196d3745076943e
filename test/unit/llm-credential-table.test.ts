// The minted credential forms of AI providers in the LLM table (translate/llm/table.ts, credentials/resolve.ts): each
// provider gets its own plan from the policy that applies to it (a GwPolicy, the GwBackend's own, or the provider's
// own), with no secret in its id; a problem is named by the path where it is written and fails the provider; the forms
// are no longer reported as not applied.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { test } from "node:test";
import { makeInput } from "../../src/translate/input.js";
import type { LlmProviderEntry } from "../../src/translate/llm/table.js";
import { translate } from "../../src/translate/translate.js";

type Doc = Record<string, unknown>;
const KEY = generateKeyPairSync("ec", { namedCurve: "prime256v1" })
  .privateKey.export({ type: "pkcs8", format: "pem" })
  .toString();

const docs = (backendPolicies: Doc, extra: Doc[] = []): Doc[] => [
  {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "Gateway",
    metadata: { name: "gw", namespace: "default" },
    spec: { gatewayClassName: "sluice", listeners: [{ name: "http", port: 8080, protocol: "HTTP" }] },
  },
  {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "signer", namespace: "default" },
    data: { signingKey: Buffer.from(KEY).toString("base64") },
  },
  {
    apiVersion: "sluice.dev/v1alpha1",
    kind: "GwBackend",
    metadata: { name: "llm", namespace: "default" },
    spec: {
      ai: {
        groups: [
          {
            providers: [
              {
                name: "own",
                providerA: {},
                host: "127.0.0.1",
                port: 9001,
                policies: {
                  auth: { jwtSign: { signingKeyRef: { name: "missing" }, alg: "ES256", claims: { sub: "x" } } },
                },
              },
              { name: "shared", providerD: {}, host: "127.0.0.1", port: 9002 },
            ],
          },
        ],
      },
      policies: backendPolicies,
    },
  },
  {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "HTTPRoute",
    metadata: { name: "r", namespace: "default" },
    spec: {
      parentRefs: [{ name: "gw" }],
      rules: [{ backendRefs: [{ group: "sluice.dev", kind: "GwBackend", name: "llm" }] }],
    },
  },
  ...extra,
];

function run(d: Doc[]) {
  const r = translate(makeInput(d as never), { impliedGatewayClass: true });
  const providers = new Map<string, LlmProviderEntry>();
  for (const e of r.llm.entries.values()) {
    for (const b of Object.values(e.backends)) for (const p of Object.values(b.providers)) providers.set(p.name, p);
  }
  const status = JSON.stringify(r.statuses.filter((s) => s.kind === "GwBackend" || s.kind === "GwPolicy"));
  return { providers, status };
}

test("each provider gets its own plan; a problem is named where it is written, never with a secret", () => {
  const { providers, status } = run(
    docs({ auth: { jwtSign: { signingKeyRef: { name: "signer" }, alg: "ES256", claims: { sub: "gw" }, ttl: "2s" } } }),
  );
  const shared = providers.get("shared");
  assert.equal(shared?.auth.minted?.primary?.kind, "jwtSign");
  assert.equal(shared?.auth.minted?.field, "backend.auth.jwtSign");
  assert.equal(shared?.auth.problems, undefined);
  assert.ok(!JSON.stringify(shared?.auth.minted?.id).includes("BEGIN"));
  // The provider's own policy wins, and its missing Secret fails that provider only, named at its own path.
  const own = providers.get("own");
  assert.equal(own?.auth.minted, undefined);
  assert.match(
    own?.auth.problems?.map((p) => p.message).join("; ") ?? "",
    /^spec\.ai\.groups\[\]\.providers\[own\]\.policies\.auth\.jwtSign\.signingKeyRef: Secret default\/missing key signingKey not found/,
  );
  assert.match(status, /SecretNotFound/);
  assert.doesNotMatch(status, /not applied to AI providers/);
  assert.ok(!status.includes("BEGIN PRIVATE KEY"));
});

test("a GwPolicy's minted form: its plan, its field path in problems, and no NotYetSupported note", () => {
  const policy = (auth: Doc): Doc => ({
    apiVersion: "sluice.dev/v1alpha1",
    kind: "GwPolicy",
    metadata: { name: "p", namespace: "default" },
    spec: { targetRefs: [{ group: "sluice.dev", kind: "GwBackend", name: "llm" }], backend: { auth } },
  });
  const tokenExchange = { oauthTokenExchange: { backendRef: { name: "no-idp", port: 80 }, path: "/token" } };
  const { providers, status } = run(docs({}, [policy(tokenExchange)]));
  const shared = providers.get("shared");
  assert.equal(shared?.auth.minted, undefined);
  assert.deepEqual(
    shared?.auth.problems?.map((p) => p.kind),
    ["invalid"],
  );
  assert.match(shared?.auth.problems?.[0]?.message ?? "", /^backend\.auth\.oauthTokenExchange\.backendRef: /);
  assert.match(status, /InvalidParameters/);
  assert.doesNotMatch(status, /NotYetSupported[^"]*oauthTokenExchange/);

  const ok = run(docs({}, [policy({ cloudC: { managedIdentity: { clientId: "mi-1" } } })]));
  assert.deepEqual(ok.providers.get("shared")?.auth.minted?.primary, {
    kind: "cloudC",
    mode: "managedIdentity",
    managedIdentity: { param: "client_id", value: "mi-1" },
    scope: "https://cognitiveservices.azure.com/.default",
  });
});

test("passthrough: the provider's own header form by default, the policy's location otherwise", () => {
  const byDefault = run(docs({ auth: { passthrough: {} } })).providers;
  assert.deepEqual(byDefault.get("shared")?.auth.passthrough, { kind: "header", name: "x-api-key", prefix: "" });
  const located = run(docs({ auth: { passthrough: {}, location: { queryParameter: { name: "key" } } } })).providers;
  assert.deepEqual(located.get("shared")?.auth.passthrough, { kind: "query", name: "key" });
});

test("a GwModel's policies.auth: cloudC and oauthTokenExchange minted as a GwBackend provider's, problems named", () => {
  const model = (name: string, auth: Doc): Doc => ({
    apiVersion: "sluice.dev/v1alpha1",
    kind: "GwModel",
    metadata: { name, namespace: "default" },
    spec: {
      parentRefs: [{ name: "gw" }],
      provider: "Provider01",
      baseURL: "http://127.0.0.1:9003/v1",
      policies: { auth },
    },
  });
  const d = docs({}, [
    model("azure", { cloudC: { workloadIdentity: {} } }),
    model("exchange", { oauthTokenExchange: { backendRef: { name: "no-idp", port: 80 } } }),
  ]);
  const r = translate(makeInput(d as never), { impliedGatewayClass: true });
  const entries = [...r.llm.entries.values()].flatMap((e) =>
    Object.values(e.backends).flatMap((b) => Object.values(b.providers).map((p) => [b.backend, p] as const)),
  );
  const of = (m: string) => entries.find(([b]) => b === `GwModel default/${m}`)?.[1];
  assert.deepEqual(of("azure")?.auth.minted?.primary, {
    kind: "cloudC",
    mode: "workloadIdentity",
    scope: "https://cognitiveservices.azure.com/.default",
  });
  assert.match(
    of("exchange")?.auth.problems?.[0]?.message ?? "",
    /^spec\.policies\.auth\.oauthTokenExchange\.backendRef: /,
  );
  const status = JSON.stringify(r.statuses.filter((s) => s.kind === "GwModel"));
  assert.match(status, /spec\.policies\.auth\.oauthTokenExchange\.backendRef/);
  assert.doesNotMatch(status, /not applied yet/);
});
