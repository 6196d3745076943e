// A command loads only the modules it needs (src/cli/main.ts loads a command's module when it runs): the file-mode
// commands never load the Kubernetes client (some 870 files, about a fifth of a start's CPU), which only `controller`
// and the cluster modes load, by `import()` when they read a cluster. Checked on the compiled modules: the static
// imports (`import ... from`, `export ... from`; not `import()`) reachable from each command's module.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { projectRoot } from "../../src/cli/paths.js";

const cli = join(projectRoot(), "dist", "src", "cli");
const STATIC_IMPORT = /(?:^|[\n;])\s*(?:import|export)\s+(?:[^;"'`]*?\sfrom\s*)?"([^"]+)"/g;

/** The packages (bare specifiers) a module reaches through static imports, following the project's own files. */
function staticPackages(entry: string): Set<string> {
  const packages = new Set<string>();
  const seen = new Set<string>();
  const todo = [entry];
  for (let file = todo.pop(); file !== undefined; file = todo.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    for (const m of readFileSync(file, "utf8").matchAll(STATIC_IMPORT)) {
      const spec = m[1] ?? "";
      if (spec.startsWith(".")) todo.push(resolve(dirname(file), spec));
      else if (!spec.startsWith("node:")) packages.add(spec);
    }
  }
  return packages;
}

const kube = (p: Set<string>) => [...p].filter((s) => s.startsWith("@kubernetes/client-node"));

test("the dispatcher and the file-mode commands reach no Kubernetes client by static imports", () => {
  for (const m of ["main.js", "serve.js", "run.js", "translate.js", "validate.js", "status.js", "explain.js"]) {
    const p = staticPackages(join(cli, m));
    assert.ok(p.has("yaml") || m === "main.js", `${m}: the walk follows imports (${[...p].length} packages)`);
    assert.deepEqual(kube(p), [], `${m} imports the Kubernetes client statically`);
  }
});

test("the controller reaches it (the walk can fail)", () => {
  assert.ok(kube(staticPackages(join(cli, "controller.js"))).length > 0);
});
