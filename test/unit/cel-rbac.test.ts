// The native RBAC translation: protos round-trip, and for a grid of requests the RBAC decision (by a small reference
// evaluator of the RBAC principal semantics used) equals the CEL decision. Envoy itself checks the same at integration.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  type CelActivation,
  type CompiledExpr,
  compileExpression,
  ipValue,
  matches,
  parseCidr,
  parsePeerIp,
} from "../../src/cel/index.js";
import { buildRbacFilters, toRbacPrincipal } from "../../src/cel/rbac.js";
import { type AuthorizationInput, authorize, compileAuthorization } from "../../src/extauthz/authorization.js";
import { type Principal, type RBAC, RBAC_Action, RBACSchema } from "../../src/gen/envoy/config/rbac/v3/rbac_pb.js";

interface Req {
  method: string;
  path: string;
  host: string;
  headers: Record<string, string>;
  ip: string;
  claims?: Record<string, unknown>;
}

function activation(r: Req): CelActivation {
  const q = r.path.indexOf("?");
  return {
    request: {
      method: r.method,
      path: q < 0 ? r.path : r.path.slice(0, q),
      host: r.host,
      scheme: "http",
      headers: new Map(Object.entries(r.headers)),
      query: new Map(),
    },
    source: { address: ipValue(parsePeerIp(r.ip)!), port: 1n },
    jwt: (r.claims ?? {}) as never,
  };
}

/** Reference semantics of the RBAC principals produced (Envoy's matchers, restricted to what the translation uses). */
function evalPrincipal(p: Principal, r: Req): boolean {
  const id = p.identifier;
  switch (id.case) {
    case "any":
      return true;
    case "andIds":
      return id.value.ids.every((x) => evalPrincipal(x, r));
    case "orIds":
      return id.value.ids.some((x) => evalPrincipal(x, r));
    case "notId":
      return !evalPrincipal(id.value, r);
    case "header": {
      const all: Record<string, string> = { ...r.headers, ":method": r.method, ":authority": r.host, ":path": r.path };
      const v = all[id.value.name];
      const s = id.value.headerMatchSpecifier;
      if (s.case === "presentMatch") return v !== undefined;
      if (v === undefined || s.case !== "stringMatch") return false;
      const m = s.value.matchPattern;
      return m.case === "exact" ? v === m.value : m.case === "prefix" ? v.startsWith(m.value) : assert.fail(m.case);
    }
    case "urlPath": {
      const path = r.path.split("?")[0]!;
      const m = id.value.rule.case === "path" ? id.value.rule.value.matchPattern : assert.fail();
      return m.case === "exact" ? path === m.value : m.case === "prefix" ? path.startsWith(m.value) : assert.fail();
    }
    case "directRemoteIp": {
      const c = parseCidr(`${id.value.addressPrefix}/${id.value.prefixLen}`)!;
      const ip = parsePeerIp(r.ip)!;
      if (ip.length !== c.addr.length) return false;
      for (let b = 0; b < c.prefix; b++) {
        const bit = (x: Uint8Array) => (x[b >> 3]! >> (7 - (b & 7))) & 1;
        if (bit(ip) !== bit(c.addr)) return false;
      }
      return true;
    }
    case "metadata": {
      const [, claimSeg] = id.value.path;
      const name = claimSeg?.segment.value ?? "";
      const v = r.claims?.[name];
      const m = id.value.value!.matchPattern;
      if (m.case === "presentMatch") return v !== undefined;
      if (m.case === "stringMatch") return typeof v === "string" && m.value.matchPattern.value === v;
      return assert.fail(m.case);
    }
    default:
      return assert.fail(`unexpected principal ${id.case}`);
  }
}

function evalFilters(filters: RBAC[], r: Req): boolean {
  for (const f of filters) {
    const matched = Object.values(f.policies).some((p) => p.principals.some((x) => evalPrincipal(x, r)));
    if (f.action === RBAC_Action.DENY ? matched : !matched) return false;
  }
  return true;
}

const compile = (t: string): CompiledExpr => {
  const r = compileExpression(t);
  assert.ok("ok" in r, t);
  return r.ok;
};

const EXPRESSIONS = [
  "request.headers['x-internal'] == 'true'",
  "'true' == request.headers['x-internal']",
  "request.headers.x_team.startsWith('eng')",
  "has(request.headers.x_team)",
  "'x-internal' in request.headers",
  "!(request.headers['x-internal'] == 'true')",
  "request.path.startsWith('/api/')",
  "request.path == '/health'",
  "request.method == 'POST'",
  "request.host == 'example.com'",
  "cidr('10.0.0.0/8').containsIP(source.address)",
  "!cidr('10.0.0.0/8').containsIP(source.address)",
  "cidr('2001:db8::/32').containsIP(source.address)",
  "jwt.sub == 'alice'",
  "jwt['group'] == 'admins'",
  "jwt.group != 'admins'",
  "has(jwt.group)",
  "request.headers['x-internal'] != 'true'",
  "!has(jwt.group) || jwt.group != 'admins'",
  "request.method == 'GET' && (request.path.startsWith('/api/') || request.headers['x-internal'] == 'true')",
  "!(request.headers['x-a'] == '1' && request.headers['x-b'] == '2')",
  "!(request.headers['x-a'] == '1' || jwt.sub == 'alice')",
  "request.headers['x-a'] == '1' || true",
  "false || !(jwt.sub == 'bob') && cidr('192.168.0.0/16').containsIP(source.address)",
];

const REQUESTS: Req[] = [];
for (const headers of [
  {},
  { "x-internal": "true" },
  { "x-internal": "no", x_team: "eng-1", "x-a": "1" },
  { "x-a": "1", "x-b": "2", x_team: "ops" },
]) {
  for (const [method, path] of [
    ["GET", "/api/v1?x=1"],
    ["POST", "/health"],
    ["GET", "/other"],
  ] as const) {
    for (const ip of ["10.1.2.3", "192.168.1.1", "2001:db8::7", "::ffff:10.0.0.1"]) {
      for (const claims of [
        undefined,
        { sub: "alice" },
        { sub: "bob", group: "admins" },
        { sub: "carol", group: "users" },
      ]) {
        REQUESTS.push({
          method,
          path,
          host: ip.startsWith("10.") ? "example.com" : "other",
          headers,
          ip,
          ...(claims ? { claims } : {}),
        });
      }
    }
  }
}

describe("native RBAC translation", () => {
  for (const text of EXPRESSIONS) {
    it(`RBAC equals CEL for ${text}`, () => {
      const c = compile(text);
      const p = toRbacPrincipal(c);
      assert.ok(p, "expressible");
      for (const r of REQUESTS) {
        assert.equal(evalPrincipal(p, r), matches(c, activation(r)), JSON.stringify(r));
      }
    });
  }

  for (const text of [
    "request.path.endsWith('.json')",
    "jwt.admin == true",
    "cidr('10.0.0.0/8').containsIP(request.headers['x-forwarded-for'])",
    "size(request.headers) > 3",
    "apiKey.group == 'gold'",
    // The spec's header map has lowercase keys: an uppercase name is a missing key there, so never native.
    "request.headers['X-A'] == '1'",
    "has(request.headers.X)",
    "'X-A' in request.headers",
  ]) {
    it(`not expressible: ${text}`, () => assert.equal(toRbacPrincipal(compile(text)), undefined));
  }

  it("a rule set maps to RBAC filters that decide like the CEL path, and round-trips as protobuf", () => {
    const inputs: AuthorizationInput[] = [
      {
        path: "allow-alice",
        rule: { action: "Allow", policy: { matchExpressions: ["jwt.sub == 'alice'", "request.path == '/health'"] } },
      },
      {
        path: "require-internal",
        rule: { action: "Require", policy: { matchExpressions: ["cidr('10.0.0.0/8').containsIP(source.address)"] } },
      },
      {
        path: "deny-post",
        rule: { action: "Deny", policy: { matchExpressions: ["request.method == 'POST'", "jwt.group != 'users'"] } },
      },
    ];
    const { authorization } = compileAuthorization(inputs);
    const rules = [...authorization.deny, ...authorization.require, ...authorization.allow];
    const filters = buildRbacFilters(rules);
    assert.ok(filters);
    assert.deepEqual(
      filters.map((f) => f.action),
      [RBAC_Action.DENY, RBAC_Action.ALLOW, RBAC_Action.ALLOW],
    );
    for (const f of filters) {
      const bytes = toBinary(RBACSchema, f);
      assert.deepEqual(toBinary(RBACSchema, fromBinary(RBACSchema, bytes)), bytes);
    }
    let allowed = 0;
    for (const r of REQUESTS) {
      const cel = authorize(authorization, activation(r)).allowed;
      assert.equal(evalFilters(filters, r), cel, JSON.stringify(r));
      if (cel) allowed++;
    }
    assert.ok(allowed > 0 && allowed < REQUESTS.length, "the grid exercises both outcomes");
  });

  it("any inexpressible expression sends the whole rule set to ext_authz", () => {
    const { authorization } = compileAuthorization([
      { path: "a", rule: { policy: { matchExpressions: ["jwt.sub == 'a'", "request.query['x'] == 'y'"] } } },
    ]);
    assert.equal(buildRbacFilters(authorization.allow), undefined);
  });

  it("what principals cannot say becomes an Envoy CEL condition, per expression, with the features it needs", () => {
    const { authorization } = compileAuthorization([
      {
        path: "allow",
        rule: {
          policy: {
            matchExpressions: [
              "request.headers['x-a'] == '1'",
              "request.headers['x-t'].lowerAscii() == 'red' && cidr('10.0.0.0/8').containsIP(source.address)",
            ],
          },
        },
      },
      {
        path: "require",
        rule: {
          action: "Require",
          policy: { matchExpressions: ["request.method == 'GET'", "size(request.host) < 64"] },
        },
      },
    ]);
    const filters = buildRbacFilters([...authorization.require, ...authorization.allow]);
    assert.ok(filters);
    const [require, allow] = filters;
    // Require: one policy; the principal and the condition both hold.
    const r = require?.policies["require"];
    assert.equal(r?.principals[0]?.identifier.case, "header");
    assert.equal(r?.condition?.exprKind.case, "callExpr");
    assert.equal(r?.celConfig, undefined, "size() and < need no optional feature");
    // Allow: one policy per expression, as a policy holds one condition.
    const keys = Object.keys(allow?.policies ?? {}).sort();
    assert.deepEqual(keys, ["allow.policy.matchExpressions[0]", "allow.policy.matchExpressions[1]"]);
    const second = allow?.policies["allow.policy.matchExpressions[1]"];
    assert.equal(second?.principals[0]?.identifier.case, "directRemoteIp");
    assert.equal(second?.celConfig?.enableStringFunctions, true);
    assert.equal(second?.celConfig?.enableStringConcat, false);
    for (const f of filters) {
      const bytes = toBinary(RBACSchema, f);
      assert.deepEqual(toBinary(RBACSchema, fromBinary(RBACSchema, bytes)), bytes);
    }
  });
});
