// rateLimitServiceConfig: envoyproxy/ratelimit's YAML for the descriptors GwPolicies' rateLimit.global send, and the
// --limit grammar of `sluice ratelimit-config`. (The e2e test ratelimit-redis runs the real service on the output.)
import assert from "node:assert/strict";
import { test } from "node:test";
import { parse } from "yaml";
import type { GwPolicy } from "../../src/api/sluice.js";
import { domainFileName, parseLimitArg, rateLimitServiceConfig } from "../../src/translate/ratelimit-config.js";

type Entry = { name: string; expression: string };
const policy = (name: string, domain: string, descriptors: { entries: Entry[]; unit?: string }[]) =>
  ({
    apiVersion: "sluice.dev/v1alpha1",
    kind: "GwPolicy",
    metadata: { name, namespace: "default" },
    spec: {
      targetRefs: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", name: "r" }],
      traffic: { rateLimit: { global: { backendRef: { name: "rls", port: 80 }, domain, descriptors } } },
    },
  }) as unknown as GwPolicy;
const e = (name: string): Entry => ({ name, expression: `request.headers['x-${name}']` });

test("one file per domain; one nested level per entry name, without a value; the limit on the innermost", () => {
  const { files, warnings } = rateLimitServiceConfig(
    [
      policy("a", "llm", [{ entries: [e("user")], unit: "Tokens" }, { entries: [e("tenant"), e("model")] }]),
      // The same chain from another policy is written once; another domain gets its own file.
      policy("b", "llm", [{ entries: [e("tenant"), e("model")] }]),
      policy("c", "web", [{ entries: [e("client")] }]),
    ],
    ["llm/user=30/day", "llm/tenant/model=5/minute", "web/client=100/second"].map(parseLimitArg),
  );
  assert.deepEqual(warnings, []);
  assert.deepEqual([...files.keys()], ["llm", "web"]);
  assert.deepEqual(parse(files.get("llm")!), {
    domain: "llm",
    descriptors: [
      { key: "tenant", descriptors: [{ key: "model", rate_limit: { unit: "minute", requests_per_unit: 5 } }] },
      { key: "user", rate_limit: { unit: "day", requests_per_unit: 30 } },
    ],
  });
  assert.deepEqual(parse(files.get("web")!), {
    domain: "web",
    descriptors: [{ key: "client", rate_limit: { unit: "second", requests_per_unit: 100 } }],
  });
});

test("warnings: a descriptor without a limit, a limit no policy uses, Requests and Tokens sharing a counter", () => {
  const { files, warnings } = rateLimitServiceConfig(
    [policy("a", "llm", [{ entries: [e("user")], unit: "Tokens" }, { entries: [e("user")] }, { entries: [e("x")] }])],
    [parseLimitArg("llm/user=1/hour"), parseLimitArg("other/y=1/hour")],
  );
  assert.equal(warnings.length, 3, warnings.join("\n"));
  assert.match(warnings[0]!, /descriptors\[0\]: llm\/user is sent as Requests by one descriptor and as Tokens/);
  assert.match(
    warnings[1]!,
    /GwPolicy default\/a: spec\.traffic\.rateLimit\.global\.descriptors\[2\]: no --limit llm\/x=/,
  );
  assert.match(warnings[2]!, /--limit other\/y: no GwPolicy sends this descriptor/);
  // Written without a limit: the service lets it through.
  assert.deepEqual(parse(files.get("llm")!).descriptors[1], { key: "x" });
});

test("parseLimitArg reads <domain>/<entry>[/<entry>...]=<n>/<unit> and names what is wrong", () => {
  assert.deepEqual(parseLimitArg("llm/user/model=7/week"), {
    domain: "llm",
    entries: ["user", "model"],
    requestsPerUnit: 7,
    unit: "week",
  });
  for (const [bad, why] of [
    ["llm=5/day", /at least one entry/],
    ["llm/user=5/fortnight", /unit must be one of second, minute/],
    ["llm/user=5", /expected <domain>/],
    ["llm//user=5/day", /at least one entry/],
    ["llm/user=4294967296/day", /above 4294967295/],
  ] as const) {
    assert.throws(() => parseLimitArg(bad), why, bad);
  }
  assert.equal(domainFileName("team/a b"), "team_a_b.yaml");
});
