// requestReads: what of the request an expression reads, so the HTTP check sends only that. Anything it cannot
// pin down to a literal header name must count as reading every header.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type CompiledExpr, compileExpression } from "../../src/cel/index.js";
import { literalHeaderKeys, requestReads } from "../../src/cel/reads.js";

function compiled(...texts: string[]): CompiledExpr[] {
  return texts.map((t) => {
    const r = compileExpression(t);
    assert.ok("ok" in r, t);
    return r.ok;
  });
}

const reads = (...texts: string[]) => {
  const r = requestReads(compiled(...texts));
  return { headers: r.headers === "all" ? "all" : [...r.headers].sort(), scheme: r.scheme, source: r.source };
};

describe("requestReads", () => {
  it("literal header lookups: index, field, has(); names lowercased", () => {
    assert.deepEqual(
      reads(
        "request.headers['x-a'] == '1'",
        "request.headers.x_b == '2'",
        "has(request.headers.x_c)",
        "request.headers['X-Upper'] == 'v'",
      ),
      { headers: ["x-a", "x-upper", "x_b", "x_c"], scheme: false, source: false },
    );
  });

  it("the map used any other way reads every header (and the :scheme pseudo-header with them)", () => {
    for (const e of [
      "request.headers.size() == 3",
      "'x-a' in request.headers",
      "request.headers.exists(k, k.startsWith('x-'))",
      "request.headers[request.path] == 'x'",
      "request.headers == {}",
    ]) {
      assert.deepEqual(reads(e), { headers: "all", scheme: true, source: false }, e);
    }
  });

  it("the whole request as a value reads everything of it", () => {
    assert.deepEqual(reads("request != null"), { headers: "all", scheme: true, source: false });
  });

  it("scheme, source, and the fields every check has", () => {
    assert.deepEqual(reads("request.scheme == 'https'"), { headers: [], scheme: true, source: false });
    assert.deepEqual(reads("request.headers[':scheme'] == 'http'"), {
      headers: [":scheme"],
      scheme: true,
      source: false,
    });
    assert.deepEqual(reads("cidr('10.0.0.0/8').containsIP(source.address)"), {
      headers: [],
      scheme: false,
      source: true,
    });
    assert.deepEqual(reads("request.method == 'GET' && request.path.startsWith('/a') && request.query['q'] == '1'"), {
      headers: [],
      scheme: false,
      source: false,
    });
  });

  it("a comprehension variable named request or source is read conservatively", () => {
    assert.deepEqual(reads("[1].exists(request, request == 1)"), { headers: "all", scheme: true, source: true });
  });

  it("the union over several expressions", () => {
    assert.deepEqual(reads("request.headers['a'] == '1'", "source.port > 0", "request.headers['b'] == '2'"), {
      headers: ["a", "b"],
      scheme: false,
      source: true,
    });
  });
});

describe("literalHeaderKeys", () => {
  const keys = (text: string) => literalHeaderKeys(compiled(text)[0]!);

  it("every literal lookup of request.headers, as written: index, field, has(), in", () => {
    assert.deepEqual(
      keys(
        "request.headers['X-A'] == '1' || request.headers.X_C == '' || has(request.headers.X_D) || 'X-E' in request.headers",
      ),
      ["X-A", "X_C", "X_D", "X-E"],
    );
  });

  it("not header keys: other maps, computed keys, literals elsewhere, a comprehension variable named request", () => {
    for (const e of [
      "request.query['X-A'] == '1'",
      "request.headers[request.path] == 'x'",
      "request.path == 'X-A' && 'X-B' in ['X-B']",
      "[{'headers': {'X-A': '1'}}].exists(request, request.headers['X-A'] == '1')",
    ]) {
      assert.deepEqual(keys(e), [], e);
    }
  });
});
