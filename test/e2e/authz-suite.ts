// The spec's authorization rules end to end through a real Envoy fed by `sluice serve`, with JWTs minted by `jose`.
// Run three times with identical cases: authz-native.test.ts (`--authorization-path auto`: rules that compile to RBAC
// run in Envoy's rbac filter), authz-sluice.test.ts (`--authorization-path sluice`: every rule in Sluice's ext_authz,
// over HTTP where the policy reads only the request and its source) and authz-sluice-grpc.test.ts
// (`--authorization-path sluice-grpc`: the same, always over gRPC).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { freePort, request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";

const ISSUER = "https://issuer.sluice.test";

/** name → rules; each case is one HTTPRoute `/<name>` with one GwPolicy per entry (rules of several combine). */
interface Case {
  readonly jwt?: "Strict" | "Optional";
  readonly policies: readonly { action?: "Allow" | "Deny" | "Require"; exprs: readonly string[] }[];
}

const CASES: Readonly<Record<string, Case>> = {
  // The spec's decision matrix: one Allow rule (jwt.sub) and one Require rule (x-internal), from two policies.
  matrix: {
    jwt: "Strict",
    policies: [
      { action: "Allow", exprs: ["jwt.sub == 'alice'"] },
      { action: "Require", exprs: ["request.headers['x-internal'] == 'true'"] },
    ],
  },
  "deny-only": { policies: [{ action: "Deny", exprs: ["request.headers['x-block'] == 'yes'"] }] },
  "require-only": { policies: [{ action: "Require", exprs: ["request.method == 'GET'"] }] },
  "allow-or": {
    policies: [
      { action: "Allow", exprs: ["request.headers['x-a'] == '1'", "request.path.startsWith('/allow-or/open')"] },
    ],
  },
  "require-and": {
    policies: [{ action: "Require", exprs: ["request.headers['x-a'] == '1'", "request.headers['x-b'] == '2'"] }],
  },
  "deny-over-allow": {
    policies: [
      { action: "Allow", exprs: ["request.method == 'GET'"] },
      { action: "Deny", exprs: ["request.headers['x-block'] == 'yes'"] },
    ],
  },
  "allow-any-policy": {
    policies: [
      { action: "Allow", exprs: ["request.headers['x-team'] == 'red'"] },
      { action: "Allow", exprs: ["request.headers['x-team'] == 'blue'"] },
    ],
  },
  "missing-claim": {
    jwt: "Optional",
    policies: [
      { action: "Allow", exprs: ["jwt.group == 'admin'"] },
      { action: "Deny", exprs: ["jwt.level == 'blocked'"] },
    ],
  },
  // Spec rule 3: `jwt.group != 'x'` is false when the claim is absent, so a Deny built on negation lets it through.
  negation: { jwt: "Strict", policies: [{ action: "Deny", exprs: ["jwt.group != 'staff'"] }] },
  guarded: { jwt: "Strict", policies: [{ action: "Deny", exprs: ["!has(jwt.group) || jwt.group != 'staff'"] }] },
  "cidr-allow": { policies: [{ action: "Allow", exprs: ["cidr('127.0.0.0/8').containsIP(source.address)"] }] },
  "cidr-deny": { policies: [{ action: "Deny", exprs: ["cidr('127.0.0.1/32').containsIP(source.address)"] }] },
  "host-and-prefix": {
    policies: [
      { action: "Require", exprs: ["request.host == 'api.test' && request.path.startsWith('/host-and-prefix/v1')"] },
    ],
  },
  // Reads jwt with no JWT authentication on the route: never matches, so all traffic is denied (still Accepted).
  "no-jwt-authn": { policies: [{ action: "Allow", exprs: ["jwt.sub == 'alice'"] }] },
  // Neither RBAC principals nor Envoy's CEL can say it (request.query is a map only here): always Sluice.
  "cel-only": { policies: [{ action: "Allow", exprs: ["request.query['n'].size() > 2"] }] },
  // Envoy CEL conditions on the native path (src/cel/envoy-condition.ts), Sluice on the others; same answers.
  "cel-lower": {
    policies: [
      {
        action: "Require",
        exprs: [
          "request.headers['x-internal'].lowerAscii() == 'true' && cidr('127.0.0.0/8').containsIP(source.address)",
        ],
      },
    ],
  },
  "cel-size": { policies: [{ action: "Allow", exprs: ["size(request.headers['x-n']) > 2"] }] },
  "cel-in": {
    policies: [{ action: "Allow", exprs: ["request.method in ['GET', 'HEAD'] && request.path.endsWith('.json')"] }],
  },
  "cel-deny-error": { policies: [{ action: "Deny", exprs: ["!request.headers['x-e'].startsWith('ok')"] }] },
  "cel-require-mixed": {
    policies: [
      {
        action: "Require",
        exprs: [
          "request.headers['x-a'] == '1'",
          "request.headers['x-b'].upperAscii() == 'B' || request.host + request.path == 'api.test/cel-require-mixed/cat'",
        ],
      },
    ],
  },
  "cel-ternary": { policies: [{ action: "Allow", exprs: ["(request.headers['x-t'] == 'a' ? source.port : 0) > 0"] }] },
  "cel-has": {
    policies: [{ action: "Deny", exprs: ["has(request.headers.xblock) && request.headers.xblock != 'no'"] }],
  },
  "cel-allow-mixed": {
    policies: [{ action: "Allow", exprs: ["request.headers['x-a'] == '1'", "request.path.endsWith('.txt')"] }],
  },
};

/** Cases whose every rule runs in Envoy on the native path: RBAC principals and Envoy CEL conditions. */
const ENVOY_CEL_CASES = [
  "cel-lower",
  "cel-size",
  "cel-in",
  "cel-deny-error",
  "cel-require-mixed",
  "cel-ternary",
  "cel-has",
  "cel-allow-mixed",
];

function configYaml(port: number, up: Upstream, jwks: string): string {
  const docs = [
    `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${port} }]`,
    `apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: echo, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${up.port} } }`,
    `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: open, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /open } }], backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }] }]`,
  ];
  for (const [name, c] of Object.entries(CASES)) {
    docs.push(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /${name} } }], backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }] }]`);
    const target = `targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: ${name} }]`;
    if (c.jwt !== undefined) {
      docs.push(`apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}-jwt, namespace: default }
spec:
  ${target}
  traffic:
    jwtAuthentication:
      mode: ${c.jwt}
      providers: [{ issuer: "${ISSUER}", jwks: { inline: ${JSON.stringify(jwks)} } }]`);
    }
    c.policies.forEach((p, i) => {
      docs.push(`apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}-${i}, namespace: default }
spec:
  ${target}
  traffic:
    authorization:
      action: ${p.action ?? "Allow"}
      policy: { matchExpressions: ${JSON.stringify(p.exprs)} }`);
    });
  }
  return `${docs.join("\n---\n")}\n`;
}

/** The names of the per-route filter configs of each route in a config dump, by the route's path prefix. */
function routeFilters(dump: unknown): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) {
      for (const x of v) visit(x);
      return;
    }
    if (v === null || typeof v !== "object") return;
    const o = v as Record<string, unknown>;
    const prefix = (o["match"] as { prefix?: string; path_separated_prefix?: string } | undefined) ?? undefined;
    const key = prefix?.path_separated_prefix ?? prefix?.prefix;
    if (key !== undefined && o["route"] !== undefined) {
      const own = Object.keys((o["typed_per_filter_config"] as object | undefined) ?? {});
      out.set(key, [...(out.get(key) ?? []), ...own]);
    }
    for (const x of Object.values(o)) visit(x);
  };
  visit(dump);
  return out;
}

const TITLES = {
  auto: "native RBAC where it compiles",
  sluice: "all in Sluice ext_authz",
  "sluice-grpc": "all in Sluice ext_authz over gRPC",
} as const;

export function authzSuite(path: keyof typeof TITLES): void {
  describe(`authorization through Envoy, ${TITLES[path]}`, () => {
    const cfg = tempConfigDir();
    let port = 0;
    let up: Upstream;
    let sluice: SluiceProcess;
    let envoy: TestEnvoy;
    let token: (claims: Record<string, unknown>) => Promise<string>;

    before(async () => {
      const { publicKey, privateKey } = await generateKeyPair("RS256");
      const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256", use: "sig" };
      token = (claims) =>
        new SignJWT(claims)
          .setProtectedHeader({ alg: "RS256", kid: "k1" })
          .setIssuer(ISSUER)
          .setIssuedAt()
          .setExpirationTime("1h")
          .sign(privateKey);
      up = await startEchoUpstream("echo");
      port = await freePort();
      cfg.write("config.yaml", configYaml(port, up, JSON.stringify({ keys: [jwk] })));
      sluice = await startSluice("serve", cfg.dir, { extraArgs: ["--authorization-path", path] });
      envoy = await startTestEnvoy(sluice);
      await waitFor("the routes", async () => ((await request(port, "/open")).status === 200 ? true : undefined));
    });

    after(async () => {
      await envoy?.stop();
      await sluice?.stop();
      await up?.close();
      cfg.cleanup();
    });

    const status = async (p: string, headers: Record<string, string> = {}) =>
      (await request(port, p, { headers })).status;
    const bearer = async (claims: Record<string, unknown>) => ({ authorization: `Bearer ${await token(claims)}` });

    test("the filters used are the ones the path promises", async () => {
      const dump = JSON.stringify(await envoy.configDump());
      if (path === "auto") assert.match(dump, /sluice\.rbac\.allow/);
      else assert.doesNotMatch(dump, /sluice\.rbac\./);
      assert.match(dump, /sluice\.ext_authz\.authz/); // cel-only always needs Sluice
      // cel-only reads only the request: an HTTP check, unless gRPC is asked for.
      if (path === "sluice-grpc") assert.doesNotMatch(dump, /sluice\.ext_authz\.authz_http/);
      else assert.match(dump, /sluice\.ext_authz\.authz_http/);
    });

    test("decision matrix: Allow jwt.sub == 'alice', Require x-internal == 'true'", async () => {
      const alice = await bearer({ sub: "alice" });
      const bob = await bearer({ sub: "bob" });
      assert.equal(await status("/matrix", { ...alice, "x-internal": "true" }), 200);
      assert.equal(await status("/matrix", { ...alice, "x-internal": "false" }), 403);
      assert.equal(await status("/matrix", { ...bob, "x-internal": "true" }), 403);
      assert.equal(await status("/matrix", { ...bob }), 403);
    });

    test("failed authentication is 401, before any authorization", async () => {
      assert.equal(await status("/matrix", { "x-internal": "true" }), 401);
      assert.equal(await status("/matrix", { authorization: "Bearer not.a.jwt", "x-internal": "true" }), 401);
    });

    test("Deny: any match denies; a policy with only Deny rules admits the rest", async () => {
      assert.equal(await status("/deny-only"), 200);
      assert.equal(await status("/deny-only", { "x-block": "yes" }), 403);
      assert.equal(await status("/deny-only", { "x-block": "no" }), 200);
    });

    test("Require only: admits every request that satisfies it", async () => {
      assert.equal(await status("/require-only"), 200);
      assert.equal((await request(port, "/require-only", { method: "POST", body: "x" })).status, 403);
    });

    test("Allow: at least one expression of the rule (OR)", async () => {
      assert.equal(await status("/allow-or/x", { "x-a": "1" }), 200);
      assert.equal(await status("/allow-or/open"), 200);
      assert.equal(await status("/allow-or/x"), 403);
    });

    test("Require: every expression (AND)", async () => {
      assert.equal(await status("/require-and", { "x-a": "1", "x-b": "2" }), 200);
      assert.equal(await status("/require-and", { "x-a": "1" }), 403);
      assert.equal(await status("/require-and", { "x-b": "2" }), 403);
    });

    test("Deny overrides Allow", async () => {
      assert.equal(await status("/deny-over-allow"), 200);
      assert.equal(await status("/deny-over-allow", { "x-block": "yes" }), 403);
    });

    test("Allow rules of several policies combine: any of them grants", async () => {
      assert.equal(await status("/allow-any-policy", { "x-team": "red" }), 200);
      assert.equal(await status("/allow-any-policy", { "x-team": "blue" }), 200);
      assert.equal(await status("/allow-any-policy", { "x-team": "green" }), 403);
    });

    test("an expression that fails to evaluate does not match (missing claim, no token)", async () => {
      assert.equal(await status("/missing-claim", await bearer({ sub: "x", group: "admin" })), 200);
      assert.equal(await status("/missing-claim", await bearer({ sub: "x" })), 403); // Allow does not grant
      assert.equal(await status("/missing-claim", await bearer({ sub: "x", group: "admin", level: "blocked" })), 403);
      // No level claim: the Deny rule does not fire.
      assert.equal(await status("/missing-claim", await bearer({ sub: "x", group: "admin", other: 1 })), 200);
      // Optional JWT and no token: jwt exists but has no claims; nothing matches the Allow rule.
      assert.equal(await status("/missing-claim"), 403);
    });

    test("Deny on negation silently allows an absent claim; has() guards it", async () => {
      assert.equal(await status("/negation", await bearer({ sub: "x" })), 200);
      assert.equal(await status("/negation", await bearer({ sub: "x", group: "other" })), 403);
      assert.equal(await status("/negation", await bearer({ sub: "x", group: "staff" })), 200);
      assert.equal(await status("/guarded", await bearer({ sub: "x" })), 403);
      assert.equal(await status("/guarded", await bearer({ sub: "x", group: "other" })), 403);
      assert.equal(await status("/guarded", await bearer({ sub: "x", group: "staff" })), 200);
    });

    test("source.address with cidr().containsIP()", async () => {
      assert.equal(await status("/cidr-allow"), 200);
      assert.equal(await status("/cidr-deny"), 403);
    });

    test("request.host and request.path.startsWith", async () => {
      assert.equal(await status("/host-and-prefix/v1/x", { host: "api.test" }), 200);
      assert.equal(await status("/host-and-prefix/v2/x", { host: "api.test" }), 403);
      assert.equal(await status("/host-and-prefix/v1/x", { host: "other.test" }), 403);
    });

    test("reading jwt without JWT authentication denies all, while the policy stays Accepted and Attached", async () => {
      assert.equal(await status("/no-jwt-authn", await bearer({ sub: "alice" })), 403);
      assert.equal(await status("/no-jwt-authn"), 403);
      const s = (await sluice.status()) as {
        resources: { kind: string; name: string; status: { ancestors: { conditions: Record<string, string>[] }[] } }[];
      };
      const policy = s.resources.find((r) => r.kind === "GwPolicy" && r.name === "no-jwt-authn-0");
      const conditions = policy?.status.ancestors[0]?.conditions ?? [];
      const byType = Object.fromEntries(conditions.map((c) => [c["type"], c]));
      assert.equal(byType["Accepted"]?.["status"], "True");
      assert.equal(byType["Attached"]?.["status"], "True");
      assert.equal(byType["Warning"]?.["reason"], "NeverMatches");
      assert.match(byType["Warning"]?.["message"] ?? "", /reads jwt but no JWT authentication applies/);
    });

    test("an expression Envoy cannot evaluate runs in Sluice on either path", async () => {
      assert.equal(await status("/cel-only?n=abc"), 200);
      assert.equal(await status("/cel-only?n=ab"), 403);
      assert.equal(await status("/cel-only"), 403);
    });

    test("CEL beyond RBAC principals: in Envoy's CEL on the native path, the same answers everywhere", async () => {
      const filters = routeFilters(await envoy.configDump());
      for (const name of ENVOY_CEL_CASES) {
        const names = filters.get(`/${name}`) ?? [];
        if (path === "auto") {
          assert.ok(
            names.some((n) => n.startsWith("sluice.rbac.")),
            `${name}: ${names.join(", ")}`,
          );
          assert.ok(!names.some((n) => n.includes("ext_authz")), `${name} calls no ext_authz: ${names.join(", ")}`);
        } else
          assert.ok(
            names.some((n) => n.includes("ext_authz")),
            `${name}: ${names.join(", ")}`,
          );
      }
      // lowerAscii (Envoy's string functions), && with a source CIDR principal
      assert.equal(await status("/cel-lower", { "x-internal": "TRUE" }), 200);
      assert.equal(await status("/cel-lower", { "x-internal": "false" }), 403);
      assert.equal(await status("/cel-lower"), 403);
      // size() of a header; a missing header is an error, which does not match
      assert.equal(await status("/cel-size", { "x-n": "abc" }), 200);
      assert.equal(await status("/cel-size", { "x-n": "ab" }), 403);
      assert.equal(await status("/cel-size"), 403);
      // `in` a list; request.path has no query (Envoy's url_path)
      assert.equal(await status("/cel-in/a.json?x=1"), 200);
      assert.equal((await request(port, "/cel-in/a.json", { method: "HEAD" })).status, 200);
      assert.equal(await status("/cel-in/a.txt"), 403);
      assert.equal((await request(port, "/cel-in/a.json", { method: "POST", body: "x" })).status, 403);
      // A Deny whose expression fails (no header) does not deny
      assert.equal(await status("/cel-deny-error"), 200);
      assert.equal(await status("/cel-deny-error", { "x-e": "okay" }), 200);
      assert.equal(await status("/cel-deny-error", { "x-e": "bad" }), 403);
      // Require: a principal and a condition; `error || true` is true; string concatenation
      assert.equal(await status("/cel-require-mixed", { "x-a": "1", "x-b": "b" }), 200);
      assert.equal(await status("/cel-require-mixed/cat", { "x-a": "1", host: "api.test" }), 200);
      assert.equal(await status("/cel-require-mixed/dog", { "x-a": "1", host: "api.test" }), 403);
      assert.equal(await status("/cel-require-mixed", { "x-a": "1", "x-b": "c" }), 403);
      assert.equal(await status("/cel-require-mixed", { "x-a": "2", "x-b": "b" }), 403);
      // A conditional over ints (source.port)
      assert.equal(await status("/cel-ternary", { "x-t": "a" }), 200);
      assert.equal(await status("/cel-ternary", { "x-t": "b" }), 403);
      assert.equal(await status("/cel-ternary"), 403);
      // has() on the header map
      assert.equal(await status("/cel-has"), 200);
      assert.equal(await status("/cel-has", { xblock: "no" }), 200);
      assert.equal(await status("/cel-has", { xblock: "yes" }), 403);
      // One Allow rule, one expression a principal and the other a condition: either grants
      assert.equal(await status("/cel-allow-mixed", { "x-a": "1" }), 200);
      assert.equal(await status("/cel-allow-mixed/f.txt"), 200);
      assert.equal(await status("/cel-allow-mixed/f.json"), 403);
    });
  });
}
