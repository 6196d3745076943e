// Timing of one synchronous function for the micro-benchmarks, printed as a row comparable with the others of a run.

/**
 * Microseconds per call of `fn` over `iterations` calls, after a tenth as many to warm up; prints `name` padded to
 * `width` and the figure with `digits` decimals.
 */
export function microBench(
  name: string,
  iterations: number,
  fn: () => void,
  o: { readonly width?: number; readonly digits?: number } = {},
): number {
  for (let i = 0; i < iterations / 10; i++) fn();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) fn();
  const us = Number(process.hrtime.bigint() - t0) / 1000 / iterations;
  console.log(`${name.padEnd(o.width ?? 62)} ${us.toFixed(o.digits ?? 3).padStart(8)} µs`);
  return us;
}
