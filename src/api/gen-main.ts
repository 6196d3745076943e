// `npm run gen:api`: writes the CRDs and reference pages generated from the schemas.

import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { exampleFile, generatedFiles } from "./generate.js";
import { SLUICE_KINDS } from "./sluice.js";

const root = process.argv[2] ?? process.cwd();
const examples = new Map<string, string>();
for (const def of SLUICE_KINDS) examples.set(def.kind, await readFile(join(root, exampleFile(def.kind)), "utf8"));
for (const [file, content] of generatedFiles(examples)) {
  await mkdir(dirname(join(root, file)), { recursive: true });
  await writeFile(join(root, file), content);
  console.log(`gen:api: ${file}`);
}
