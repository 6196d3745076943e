// retry-condition.ts: a CEL retry condition on the status code alone, as the codes it is true for.

import assert from "node:assert/strict";
import { test } from "node:test";
import { retryConditionCodes } from "../../src/translate/xds/retry-condition.js";

function codes(text: string): readonly number[] {
  const r = retryConditionCodes(text);
  assert.ok(r.ok, r.ok ? "" : r.why);
  return r.codes;
}

test("the codes are the ones the expression is true for, whatever its shape", () => {
  assert.deepEqual(codes("response.code == 503"), [503]);
  assert.deepEqual(codes("response.code in [502, 503]"), [502, 503]);
  assert.deepEqual(codes("response.code > 597"), [598, 599]);
  assert.deepEqual(codes("!(response.code < 598)"), [598, 599]);
  assert.deepEqual(codes("[409, 425].exists(c, c == response.code)"), [409, 425]);
  assert.deepEqual(
    codes("response.code / 100 == 1"),
    Array.from({ length: 100 }, (_, i) => 100 + i),
  );
  // Not a boolean, or an error for some codes: those codes are not retried (the spec's rule for failed expressions).
  assert.deepEqual(codes("response.code"), []);
  assert.deepEqual(codes("100 / (response.code - 500) == 100"), [501]);
});

test("anything read besides response.code, and what does not compile, is said", () => {
  const why = (text: string) => {
    const r = retryConditionCodes(text);
    assert.equal(r.ok, false, text);
    return r.ok ? "" : r.why;
  };
  assert.match(why("response.code == 503 && response.headers['x'] == '1'"), /reads response\.headers/);
  assert.match(why("request.method == 'GET' && response.code == 503"), /reads request/);
  assert.match(why("has(response.body)"), /reads response\.body/);
  assert.match(why("[1].exists(c, c == jwt.n)"), /reads jwt/);
  assert.match(why("response.code =="), /does not compile/);
  assert.match(why("nosuch == 1"), /does not compile/);
});
