import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type CelActivation,
  type CompiledExpr,
  compileExpression,
  evaluate,
  formatIp,
  ipValue,
  matches,
  parseCidr,
  parseIp,
  parsePeerIp,
  referencedVariables,
} from "../../src/cel/index.js";

function compile(text: string): CompiledExpr {
  const r = compileExpression(text);
  if (!("ok" in r)) throw new Error(`${text}: ${JSON.stringify(r.errors)}`);
  return r.ok;
}

function run(text: string, activation: CelActivation = {}): unknown {
  const r = evaluate(compile(text), activation);
  return "value" in r ? r.value : { error: r.error };
}

const activation: CelActivation = {
  request: {
    method: "GET",
    path: "/api/v1/items",
    host: "example.com",
    scheme: "https",
    headers: new Map([
      ["x-internal", "true"],
      ["authorization", "Bearer abc"],
    ]),
    query: new Map([["page", "2"]]),
  },
  source: { address: ipValue(parsePeerIp("10.1.2.3")!), port: 51234n },
  jwt: new Map<string, unknown>([
    ["sub", "alice"],
    ["groups", ["eng", "ops"]],
  ]) as never,
  apiKey: { group: "gold" },
  basicAuth: { username: "bob" },
};

describe("IP/CIDR library (Kubernetes CEL examples)", () => {
  const cases: [string, unknown][] = [
    ["isIP('127.0.0.1')", true],
    ["isIP('::1')", true],
    ["isIP('127.0.0.256')", false],
    ["isIP(':::1')", false],
    ["isIP('127.0.0.01')", false],
    ["isIP('::ffff:1.2.3.4')", false],
    ["isIP('fe80::1%eth0')", false],
    ["ip.isCanonical('127.0.0.1')", true],
    ["ip.isCanonical('2001:db8::abcd')", true],
    ["ip.isCanonical('2001:DB8::ABCD')", false],
    ["ip.isCanonical('2001:db8::0:0:0:abcd')", false],
    ["ip('127.0.0.1').family()", 4n],
    ["ip('::1').family()", 6n],
    ["ip('127.0.0.1').isLoopback()", true],
    ["ip('::1').isLoopback()", true],
    ["ip('1.2.3.4').isLoopback()", false],
    ["ip('0.0.0.0').isUnspecified()", true],
    ["ip('::').isUnspecified()", true],
    ["ip('127.0.0.1').isUnspecified()", false],
    ["ip('224.0.0.1').isLinkLocalMulticast()", true],
    ["ip('224.0.1.1').isLinkLocalMulticast()", false],
    ["ip('ff02::1').isLinkLocalMulticast()", true],
    ["ip('fd00::1').isLinkLocalMulticast()", false],
    ["ip('169.254.169.254').isLinkLocalUnicast()", true],
    ["ip('192.168.0.1').isLinkLocalUnicast()", false],
    ["ip('fe80::1').isLinkLocalUnicast()", true],
    ["ip('fd80::1').isLinkLocalUnicast()", false],
    ["ip('192.168.0.1').isGlobalUnicast()", true],
    ["ip('255.255.255.255').isGlobalUnicast()", false],
    ["ip('2001:db8::abcd').isGlobalUnicast()", true],
    ["ip('ff00::1').isGlobalUnicast()", false],
    ["string(ip('127.0.0.1'))", "127.0.0.1"],
    ["string(ip('2001:DB8::ABCD'))", "2001:db8::abcd"],
    ["ip('2001:db8::1') == ip('2001:DB8:0:0:0:0:0:1')", true],
    ["ip('10.0.0.1') == ip('10.0.0.2')", false],
    ["isCIDR('192.168.0.0/16')", true],
    ["isCIDR('192.168.0.0/33')", false],
    ["isCIDR('::1/128')", true],
    ["isCIDR('::1/129')", false],
    ["isCIDR('10.0.0.0')", false],
    ["cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))", true],
    ["cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))", false],
    ["cidr('192.168.0.0/24').containsIP('192.168.0.1')", true],
    ["cidr('192.168.0.0/24').containsIP(ip('::1'))", false],
    ["cidr('::/0').containsIP(ip('10.0.0.1'))", false],
    ["cidr('0.0.0.0/0').containsIP(ip('10.0.0.1'))", true],
    ["cidr('192.168.0.0/23').containsIP('192.168.1.255')", true],
    ["cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))", true],
    ["cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')", false],
    ["cidr('192.168.0.0/24').containsCIDR(cidr('192.168.10.0/25'))", false],
    ["cidr('2001:db8::/32').containsCIDR('2001:db8:1::/48')", true],
    ["cidr('192.168.0.1/24').ip() == ip('192.168.0.1')", true],
    ["cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')", true],
    ["cidr('::1/128').prefixLength()", 128n],
    ["string(cidr('2001:DB8::/32'))", "2001:db8::/32"],
    ["string(cidr('192.168.0.1/24').masked())", "192.168.0.0/24"],
    ["type(ip('1.2.3.4')) == type(ip('::1'))", true],
  ];
  for (const [expr, want] of cases) {
    it(expr, () => assert.deepEqual(run(expr), want));
  }
  for (const expr of ["ip('127.0.0.256')", "ip('::ffff:1.2.3.4')", "cidr('10.0.0.0/33')", "ip.isCanonical('x')"]) {
    it(`${expr} is an evaluation error`, () => {
      const r = evaluate(compile(expr), {});
      assert.ok("error" in r, JSON.stringify(r));
    });
  }
  it("formats and parses addresses canonically", () => {
    assert.equal(formatIp(parseIp("2001:db8:0:0:1:0:0:1")!), "2001:db8::1:0:0:1");
    assert.equal(formatIp(parseIp("0:0:0:0:0:0:0:0")!), "::");
    assert.equal(formatIp(parseIp("1:0:0:2:0:0:0:3")!), "1:0:0:2::3");
    assert.equal(formatIp(parseIp("::1.2.3.4")!), "::102:304");
    assert.equal(parseIp("1::2::3"), undefined);
    assert.equal(parseIp("1:2:3:4:5:6:7:8:9"), undefined);
    assert.equal(parseCidr("10.0.0.0/08"), undefined);
    assert.deepEqual(parsePeerIp("::ffff:10.1.2.3"), new Uint8Array([10, 1, 2, 3]));
  });
});

describe("spec environment", () => {
  const cases: [string, unknown][] = [
    ["cidr('10.0.0.0/8').containsIP(source.address)", true],
    ["cidr('192.168.0.0/16').containsIP(source.address)", false],
    ["source.port == 51234", true],
    ["request.headers['x-internal'] == 'true'", true],
    ["request.path.startsWith('/api/')", true],
    ["request.method == 'GET' && request.host == 'example.com' && request.scheme == 'https'", true],
    ["request.query.page == '2'", true],
    ["jwt.sub == 'alice'", true],
    ["'ops' in jwt.groups", true],
    ["has(jwt.group)", false],
    ["has(jwt.sub)", true],
    ["apiKey.group == 'gold'", true],
    ["basicAuth.username == 'bob'", true],
    ["request.headers.exists(h, h.startsWith('x-'))", true],
    ["request.path.lowerAscii().contains('items')", true],
  ];
  for (const [expr, want] of cases) {
    it(expr, () => assert.deepEqual(run(expr, activation), want));
  }

  it("a missing claim is an error, so negation does not match (spec expression rule 3)", () => {
    const c = compile("jwt.group != 'x'");
    assert.ok("error" in evaluate(c, activation));
    assert.equal(matches(c, activation), false);
  });

  it("an absent variable is an error, never an exception", () => {
    const c = compile("jwt.sub == 'alice'");
    assert.ok("error" in evaluate(c, { request: activation.request! }));
    assert.equal(matches(c, {}), false);
  });

  it("a header named like an Object.prototype member is absent", () => {
    assert.deepEqual(run("has(request.headers.constructor)", activation), false);
    assert.deepEqual(run("has(apiKey.constructor)", activation), false);
  });

  it("reports referenced variables, ignoring comprehension variables and function namespaces", () => {
    const c = compile(
      "jwt.groups.exists(jwt, jwt == 'x') || ip.isCanonical(request.path) || [1].all(apiKey, apiKey > 0) || source.port > 0",
    );
    assert.deepEqual([...referencedVariables(c)].sort(), ["jwt", "request", "source"]);
    assert.deepEqual([...referencedVariables(compile("has(jwt.sub)"))], ["jwt"]);
  });

  it("compile errors have messages and positions, never exceptions", () => {
    const bad: [string, RegExp, number?][] = [
      ["request.path.startsWith(", /syntax error/],
      ["", /empty/],
      ["a == 1", /undeclared reference to 'a'/, 1],
      ["request.path == 'x' && nosuchfn(1)", /undeclared reference to function 'nosuchfn'/, 24],
      ["x".repeat(16385), /at most 16384/],
      ["((((((((((((((((((((1))))))))))))))))))))", /./],
    ];
    for (const [text, re, column] of bad) {
      const r = compileExpression(text);
      if (text.startsWith("((((")) {
        assert.ok("ok" in r); // deep but legal nesting compiles
        continue;
      }
      assert.ok("errors" in r, text);
      assert.match(r.errors[0]!.message, re);
      if (column !== undefined) assert.equal(r.errors[0]!.position?.column, column, text);
    }
    const nested = compileExpression(`${"(".repeat(5000)}1${")".repeat(5000)}`);
    assert.ok("errors" in nested || "ok" in nested);
  });

  it("compiles once and evaluates many times with different activations", () => {
    const c = compile("request.headers['x-user'] == 'a'");
    const mk = (v: string): CelActivation => ({
      ...activation,
      request: { ...activation.request!, headers: new Map([["x-user", v]]) },
    });
    assert.equal(matches(c, mk("a")), true);
    assert.equal(matches(c, mk("b")), false);
    assert.equal(matches(c, mk("a")), true);
  });
});
