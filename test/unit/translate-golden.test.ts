// Golden tests of the translator: test/golden/translate/<case>.in.yaml → <case>.out.yaml (problems, status, IR, xDS).
// Regenerate with UPDATE_GOLDEN=1; review the diff.

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { assertGolden, goldenCases, goldenDir, orphanedGoldens } from "../helpers/golden.js";
import { translateToGoldenYaml } from "../helpers/translate.js";

const dir = goldenDir("translate");

for (const name of goldenCases(dir)) {
  test(`translate golden: ${name}`, async () => {
    const actual = await translateToGoldenYaml(join(dir, `${name}.in.yaml`), dir);
    assertGolden(join(dir, `${name}.out.yaml`), actual);
  });
}

test("translate goldens: no orphaned outputs", () => {
  assert.deepEqual(orphanedGoldens(dir), []);
});
