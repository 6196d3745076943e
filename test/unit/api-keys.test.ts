import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import type { CelActivation } from "../../src/cel/index.js";
import { type ApiKeyAuthSpec, buildApiKeyStore, checkApiKey, compileApiKeyAuth } from "../../src/extauthz/api-keys.js";
import { parseQuery } from "../../src/extauthz/credentials.js";

const hash = (k: string) => `sha256:${createHash("sha256").update(k).digest("hex")}`;

const secret = {
  kind: "Secret" as const,
  name: "default/keys",
  data: {
    plain: "k-plain\n",
    json: JSON.stringify({ key: "k-json", metadata: { group: "gold", tier: 2 } }),
    hashed: JSON.stringify({ keyHash: hash("k-hashed"), metadata: { group: "silver" } }),
  },
};
const configMap = {
  kind: "ConfigMap" as const,
  name: "default/cm-keys",
  data: {
    ok: JSON.stringify({ keyHash: hash("k-cm").toUpperCase().replace("SHA256:", "sha256:"), metadata: { team: "a" } }),
    raw: "k-raw",
    rawJson: JSON.stringify({ key: "k-raw-json" }),
  },
};

function req(headers: Record<string, string>, path = "/"): CelActivation {
  return {
    request: {
      method: "GET",
      path,
      host: "h",
      scheme: "http",
      headers: new Map(Object.entries(headers)),
      query: parseQuery(path),
    },
  };
}

describe("API key store", () => {
  const { store, problems } = buildApiKeyStore([secret, configMap]);

  it("accepts plain, JSON key and JSON keyHash entries from Secrets and hashed entries from ConfigMaps", () => {
    assert.equal(store.size, 4);
    assert.deepEqual(store.lookup("k-plain"), { id: "Secret/default/keys/plain", metadata: {} });
    assert.deepEqual(store.lookup("k-json")?.metadata, { group: "gold", tier: 2 });
    assert.deepEqual(store.lookup("k-hashed")?.metadata, { group: "silver" });
    assert.deepEqual(store.lookup("k-cm")?.metadata, { team: "a" });
    assert.equal(store.lookup("k-plain\n"), undefined);
    assert.equal(store.lookup("nope"), undefined);
    assert.equal(store.lookup(""), undefined);
  });

  it("rejects raw keys from a ConfigMap with a clear error, naming the entry but never the key", () => {
    assert.equal(store.lookup("k-raw"), undefined);
    assert.equal(store.lookup("k-raw-json"), undefined);
    assert.deepEqual(
      problems.map((p) => p.path),
      ["ConfigMap/default/cm-keys.data.raw", "ConfigMap/default/cm-keys.data.rawJson"],
    );
    assert.match(problems[0]!.message, /a raw key is rejected/);
    assert.match(problems[1]!.message, /a raw "key" is rejected/);
    for (const p of problems) assert.doesNotMatch(p.message, /k-raw/);
  });

  it("reports malformed entries and duplicates", () => {
    const r = buildApiKeyStore([
      {
        kind: "Secret",
        name: "ns/s",
        data: {
          a: "{not json",
          b: JSON.stringify({ key: "x", keyHash: hash("x") }),
          c: JSON.stringify({ keyHash: "sha256:abc" }),
          d: JSON.stringify({ keyHash: "md5:0123" }),
          e: "   ",
          f: "[1]",
          g: "dup",
          h: JSON.stringify({ keyHash: hash("dup") }),
        },
      },
    ]);
    assert.equal(r.store.size, 2); // g, and f: a value that is not a JSON object is a plain key
    assert.deepEqual(
      r.problems.map((p) => p.path.split(".").pop()),
      ["a", "b", "c", "d", "e", "h"],
    );
    assert.match(r.problems[5]!.message, /already defined by Secret\/ns\/s\/g/);
  });
});

describe("API key authentication", () => {
  const auth = (spec: ApiKeyAuthSpec) => {
    const r = compileApiKeyAuth(spec, [secret], "spec.traffic.apiKeyAuthentication");
    assert.ok(r.auth, JSON.stringify(r.problems));
    return r.auth;
  };

  it("reads `Authorization: Bearer <key>` by default, scheme case-insensitively", () => {
    const a = auth({});
    assert.equal(checkApiKey(a, req({ authorization: "Bearer k-plain" })).outcome, "authenticated");
    assert.equal(checkApiKey(a, req({ authorization: "bearer   k-plain" })).outcome, "authenticated");
    assert.deepEqual(checkApiKey(a, req({ authorization: "Bearerk-plain" })), { outcome: "denied", reason: "missing" });
    assert.deepEqual(checkApiKey(a, req({ authorization: "Basic k-plain" })), { outcome: "denied", reason: "missing" });
  });

  const locations: [string, ApiKeyAuthSpec["location"], CelActivation][] = [
    ["header without prefix", { header: { name: "X-API-Key" } }, req({ "x-api-key": "k-json" })],
    ["header with prefix", { header: { name: "x-auth", prefix: "Key" } }, req({ "x-auth": "Key k-json" })],
    ["query parameter", { queryParameter: { name: "api_key" } }, req({}, "/p?x=1&api_key=k-json")],
    ["cookie", { cookie: { name: "apikey" } }, req({ cookie: "a=b; apikey=k-json; c=d" })],
    ["CEL expression", { expression: "request.headers['x-k'].split(',')[1]" }, req({ "x-k": "zz,k-json" })],
  ];
  for (const [name, location, activation] of locations) {
    it(`location: ${name}`, () => {
      const r = checkApiKey(auth({ location: location! }), activation);
      assert.equal(r.outcome, "authenticated");
      assert.deepEqual(r.outcome === "authenticated" && r.entry.metadata, { group: "gold", tier: 2 });
    });
  }

  const modes: [ApiKeyAuthSpec["mode"], string, string, string][] = [
    // mode, no key, wrong key, right key
    ["Strict", "denied", "denied", "authenticated"],
    ["Optional", "anonymous", "denied", "authenticated"],
    ["Permissive", "anonymous", "anonymous", "authenticated"],
  ];
  for (const [mode, none, wrong, right] of modes) {
    it(`mode ${mode}`, () => {
      const a = auth({ mode: mode! });
      assert.equal(checkApiKey(a, req({})).outcome, none);
      assert.equal(checkApiKey(a, req({ authorization: "Bearer wrong" })).outcome, wrong);
      assert.equal(checkApiKey(a, req({ authorization: "Bearer k-hashed" })).outcome, right);
    });
  }

  it("reports invalid configuration instead of throwing", () => {
    const r = compileApiKeyAuth(
      { mode: "Sometimes" as never, location: { header: { name: "a" }, cookie: { name: "b" } } as never },
      [],
      "p",
    );
    assert.equal(r.auth, undefined);
    assert.deepEqual(
      r.problems.map((p) => p.path),
      ["p.mode", "p.location"],
    );
    const bad = compileApiKeyAuth({ location: { expression: "request.(" } }, [], "p");
    assert.equal(bad.problems[0]?.path, "p.location.expression");
  });
});
