// Golden files: compare, or rewrite with UPDATE_GOLDEN=1. Orphaned goldens (no input) fail the suite.

import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../src/cli/paths.js";

export const UPDATE = process.env["UPDATE_GOLDEN"] === "1";

export function goldenDir(...parts: string[]): string {
  return join(projectRoot(), "test", "golden", ...parts);
}

/** Cases of a golden directory: every `<name>.in.yaml`, sorted. */
export function goldenCases(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".in.yaml"))
    .map((f) => f.slice(0, -".in.yaml".length))
    .sort();
}

/** Output goldens whose input is gone: deleted under UPDATE_GOLDEN=1, reported otherwise. */
export function orphanedGoldens(dir: string, outSuffix = ".out.yaml"): string[] {
  const cases = new Set(goldenCases(dir));
  const orphans = readdirSync(dir).filter((f) => f.endsWith(outSuffix) && !cases.has(f.slice(0, -outSuffix.length)));
  if (UPDATE) for (const f of orphans) unlinkSync(join(dir, f));
  return UPDATE ? [] : orphans;
}

export function assertGolden(file: string, actual: string): void {
  if (UPDATE || !existsSync(file)) {
    writeFileSync(file, actual);
    if (!UPDATE) assert.fail(`golden ${file} did not exist; written now, review and commit it`);
    return;
  }
  assert.equal(actual, readFileSync(file, "utf8"), `golden mismatch: ${file} (UPDATE_GOLDEN=1 to regenerate)`);
}
