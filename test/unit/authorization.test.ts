import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type CelActivation, ipValue, parsePeerIp } from "../../src/cel/index.js";
import {
  type AuthorizationInput,
  authorize,
  compileAuthorization,
  unavailableVariableWarnings,
} from "../../src/extauthz/authorization.js";

function req(opts: { sub?: string; internal?: string; group?: string; ip?: string; jwt?: boolean }): CelActivation {
  const headers = new Map<string, string>();
  if (opts.internal !== undefined) headers.set("x-internal", opts.internal);
  const claims: Record<string, string> = {};
  if (opts.sub !== undefined) claims["sub"] = opts.sub;
  if (opts.group !== undefined) claims["group"] = opts.group;
  return {
    request: { method: "GET", path: "/", host: "h", scheme: "http", headers, query: new Map() },
    source: { address: ipValue(parsePeerIp(opts.ip ?? "10.0.0.1")!), port: 1234n },
    ...(opts.jwt === false ? {} : { jwt: claims }),
  };
}

function rules(...r: [AuthorizationInput["rule"]["action"], ...string[]][]): AuthorizationInput[] {
  return r.map(([action, ...matchExpressions], i) => ({
    path: `policy${i}.spec.traffic.authorization`,
    rule: { ...(action ? { action } : {}), policy: { matchExpressions } },
  }));
}

function decide(inputs: AuthorizationInput[], activation: CelActivation): number {
  const { authorization, problems } = compileAuthorization(inputs);
  assert.deepEqual(problems, []);
  return authorize(authorization, activation).allowed ? 200 : 403;
}

describe("authorization: the spec's decision matrix", () => {
  // One Allow rule (jwt.sub equals a subject) and one Require rule (x-internal header equals "true").
  const matrix = rules(["Allow", "jwt.sub == 'alice'"], ["Require", "request.headers['x-internal'] == 'true'"]);
  const table: [string, CelActivation, number][] = [
    ["allow matches, require satisfied", req({ sub: "alice", internal: "true" }), 200],
    ["allow matches, require not satisfied", req({ sub: "alice", internal: "false" }), 403],
    ["allow does not match, require satisfied", req({ sub: "bob", internal: "true" }), 403],
    ["neither", req({ sub: "bob" }), 403],
  ];
  for (const [name, activation, want] of table) it(name, () => assert.equal(decide(matrix, activation), want));
});

describe("authorization: rules", () => {
  const cases: [string, AuthorizationInput[], CelActivation, number][] = [
    ["no rules admit everything", [], req({}), 200],
    ["Allow is the default action", rules([undefined, "jwt.sub == 'alice'"]), req({ sub: "bob" }), 403],
    [
      "Allow: one of several expressions suffices (OR)",
      rules(["Allow", "false", "jwt.sub == 'a'"]),
      req({ sub: "a" }),
      200,
    ],
    ["Allow: any of several Allow rules", rules(["Allow", "false"], ["Allow", "true"]), req({}), 200],
    ["Allow: none match, denied", rules(["Allow", "false"], ["Allow", "jwt.sub == 'x'"]), req({ sub: "a" }), 403],
    ["Deny overrides Allow", rules(["Allow", "true"], ["Deny", "jwt.sub == 'a'"]), req({ sub: "a" }), 403],
    [
      "Deny not matching lets Allow decide",
      rules(["Allow", "true"], ["Deny", "jwt.sub == 'a'"]),
      req({ sub: "b" }),
      200,
    ],
    ["Deny: any expression denies", rules(["Deny", "false", "true"]), req({}), 403],
    ["only Deny rules: non-matching requests pass", rules(["Deny", "jwt.sub == 'a'"]), req({ sub: "b" }), 200],
    ["Require: every expression must be true (AND)", rules(["Require", "true", "false"]), req({}), 403],
    ["Require rules are cumulative", rules(["Require", "true"], ["Require", "false"]), req({}), 403],
    ["only Require rules admit what satisfies them", rules(["Require", "true"], ["Require", "1 == 1"]), req({}), 200],
    ["Require before Allow", rules(["Allow", "true"], ["Require", "jwt.sub == 'a'"]), req({ sub: "b" }), 403],
    // Errors do not match: Allow does not grant, Deny does not fire, Require is false.
    ["an erroring Allow does not grant", rules(["Allow", "jwt.nope == 'x'"]), req({}), 403],
    ["an erroring Deny does not fire", rules(["Deny", "jwt.nope == 'x'"]), req({}), 200],
    ["an erroring Require is false", rules(["Require", "jwt.nope == 'x'"]), req({}), 403],
    ["a non-boolean result does not match", rules(["Allow", "jwt.sub"]), req({ sub: "a" }), 403],
    // Spec expression rule 3: `jwt.group != 'x'` is false when the claim is absent, so Deny on negation allows.
    [
      "Deny on negation silently allows when the claim is absent",
      rules(["Deny", "jwt.group != 'admins'"]),
      req({}),
      200,
    ],
    [
      "the same Deny fires when the claim is present",
      rules(["Deny", "jwt.group != 'admins'"]),
      req({ group: "u" }),
      403,
    ],
    ["guarding with has() makes it deny", rules(["Deny", "!has(jwt.group) || jwt.group != 'admins'"]), req({}), 403],
    ["Require with a positive condition denies", rules(["Require", "jwt.group == 'admins'"]), req({}), 403],
    // Errors section: reading jwt without JWT authentication denies all traffic.
    ["jwt without JWT authentication never matches", rules(["Allow", "jwt.sub == 'a'"]), req({ jwt: false }), 403],
    ["source CIDR", rules(["Allow", "cidr('10.0.0.0/8').containsIP(source.address)"]), req({ ip: "10.9.9.9" }), 200],
    [
      "source CIDR miss",
      rules(["Allow", "cidr('10.0.0.0/8').containsIP(source.address)"]),
      req({ ip: "11.0.0.1" }),
      403,
    ],
  ];
  for (const [name, inputs, activation, want] of cases) it(name, () => assert.equal(decide(inputs, activation), want));

  it("reports which rule decided", () => {
    const { authorization } = compileAuthorization(rules(["Allow", "true"], ["Deny", "true"]));
    assert.deepEqual(authorize(authorization, req({})), {
      allowed: false,
      reason: "Deny",
      rule: "policy1.spec.traffic.authorization",
    });
  });
});

describe("authorization: compile problems and warnings", () => {
  it("reports every invalid expression with its path and leaves the rule out", () => {
    const { authorization, problems } = compileAuthorization(
      rules(["Allow", "jwt.sub ==", "true", "nosuch.x"], ["Deny", "true"]),
    );
    assert.equal(problems.length, 2);
    assert.equal(problems[0]!.path, "policy0.spec.traffic.authorization.policy.matchExpressions[0]");
    assert.match(problems[0]!.message, /syntax error.*line 1, column/);
    assert.equal(problems[1]!.path, "policy0.spec.traffic.authorization.policy.matchExpressions[2]");
    assert.match(problems[1]!.message, /undeclared reference to 'nosuch'/);
    assert.equal(authorization.allow.length, 0);
    assert.equal(authorization.deny.length, 1);
  });

  it("rejects an unknown action and an empty expression list", () => {
    const { problems } = compileAuthorization([
      { path: "p", rule: { action: "Maybe" as never, policy: { matchExpressions: ["true"] } } },
      { path: "q", rule: { policy: { matchExpressions: [] } } },
    ]);
    assert.deepEqual(
      problems.map((p) => p.path),
      ["p.action", "q.policy.matchExpressions"],
    );
  });

  it("warns when a rule reads a variable the target cannot provide", () => {
    const { authorization } = compileAuthorization(rules(["Allow", "jwt.sub == 'a' && request.path == '/'"]));
    const w = unavailableVariableWarnings(authorization, new Set(["request", "source"]));
    assert.equal(w.length, 1);
    assert.match(w[0]!.message, /reads `jwt` but no JWT authentication applies/);
    assert.deepEqual(unavailableVariableWarnings(authorization, new Set(["request", "jwt"])), []);
  });
});
