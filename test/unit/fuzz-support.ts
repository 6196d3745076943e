// Time-bounded property runs for the fuzz-*.test.ts files. In the suite each property runs for at most
// FUZZ_SECONDS (1.5 s by default) or FUZZ_RUNS cases, whichever comes first; scripts/fuzz.sh sets both higher for a
// longer run and FUZZ_REPORT=1 to print how many cases each property ran. A failure names its seed and the shrunk
// counterexample (fast-check's report), which then becomes a regular test beside the property.

import assert from "node:assert/strict";
import fc from "fast-check";

const seconds = Number(process.env["FUZZ_SECONDS"] ?? "1.5");
const runs = Number(process.env["FUZZ_RUNS"] ?? "3000");
const seed = process.env["FUZZ_SEED"] === undefined ? undefined : Number(process.env["FUZZ_SEED"]);

/** Checks `prop` for the time budget; fails with fast-check's report (seed, path, counterexample). */
export async function holds<Ts extends [unknown, ...unknown[]]>(
  name: string,
  prop: fc.IAsyncPropertyWithHooks<Ts> | fc.IPropertyWithHooks<Ts>,
): Promise<void> {
  const started = performance.now();
  const details = await fc.check(prop as fc.IAsyncProperty<Ts>, {
    numRuns: runs,
    interruptAfterTimeLimit: seconds * 1000,
    markInterruptAsFailure: false,
    ...(seed === undefined ? {} : { seed }),
  });
  if (process.env["FUZZ_REPORT"] === "1") {
    const s = ((performance.now() - started) / 1000).toFixed(1);
    console.log(`fuzz: ${name}: ${details.numRuns} cases in ${s} s, ${details.failed ? "FAILED" : "no failure"}`);
  }
  if (details.failed) {
    const cause =
      details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
    assert.fail(`${name}: ${fc.defaultReportMessage(details) ?? "failed"}\n${cause}`);
  }
}

/** Splits `bytes` at the given cut points (any numbers; taken modulo the length, sorted, deduplicated). */
export function splitAt(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  if (bytes.byteLength === 0) return [bytes];
  const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const p of [...points, bytes.byteLength]) {
    out.push(bytes.subarray(prev, p));
    prev = p;
  }
  return out;
}

/** Runs `fn` and fails if it takes longer than `ms` of wall time (the fuzzed code is synchronous: no hang hides). */
export function within<T>(ms: number, what: string, fn: () => T): T {
  const t = performance.now();
  const v = fn();
  const took = performance.now() - t;
  assert.ok(took <= ms, `${what} took ${took.toFixed(0)} ms (bound ${ms} ms)`);
  return v;
}
