// Golden tests of policy attachment: test/golden/policy/<rule>.in.yaml → <rule>.out.yaml (GwPolicy status and the
// effective policies in the IR). One case per precedence, merge, inheritance and phase rule of the spec, named after
// the rule. Regenerate with UPDATE_GOLDEN=1; review the diff.

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { assertGolden, goldenCases, goldenDir, orphanedGoldens } from "../helpers/golden.js";
import { policyToGoldenYaml } from "../helpers/policy.js";

const dir = goldenDir("policy");

for (const name of goldenCases(dir)) {
  test(`policy golden: ${name}`, async () => {
    const actual = await policyToGoldenYaml(join(dir, `${name}.in.yaml`), dir);
    assertGolden(join(dir, `${name}.out.yaml`), actual);
  });
}

test("policy goldens: no orphaned outputs", () => {
  assert.deepEqual(orphanedGoldens(dir), []);
});
