// Validation throughput: the examples replicated to N documents, with unique names and unique CEL expressions (the
// worst case for the parse cache), validated in one pass. Prints documents per second and ms per 5,000.

import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { validateResource } from "../src/api/validate.js";
import { parseYamlFile } from "../src/sources/yaml.js";

const n = Number(process.argv[2] ?? 5000);
const seeds: unknown[] = [];
for (const f of ["gwpolicy", "gwbackend", "gwmodel", "gwparameters"]) {
  const text = await readFile(join(import.meta.dirname, `../../examples/api/${f}.yaml`), "utf8");
  for (const d of parseYamlFile(f, text).documents) seeds.push(d.value);
}
function docs(unique: boolean): unknown[] {
  return Array.from({ length: n }, (_, i) => {
    const text = JSON.stringify(seeds[i % seeds.length]).replaceAll('"name":"', `"name":"n${i}-`);
    return JSON.parse(unique ? text.replaceAll("jwt.sub", `jwt.sub${i}`) : text);
  });
}
for (const [label, set] of [
  ["repeated expressions", docs(false)],
  ["unique expressions", docs(true)],
] as const) {
  const t0 = performance.now();
  let valid = 0;
  for (const d of set) if (validateResource(d).resource !== undefined) valid++;
  const ms = performance.now() - t0;
  console.log(
    `${label}: ${n} documents (${valid} valid) in ${ms.toFixed(1)} ms = ${((n / ms) * 1000).toFixed(0)} docs/s`,
  );
}
