// Sluice's Node flags are given by each of its launchers, and must be the same everywhere: the `sluice` command's first
// line (npx sluice, a global install), the image's ENTRYPOINT (the Helm chart and the controller's pods), the
// quickstart script, and the helper the tests and benches start it with (so the soak measures what users run).

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { projectRoot } from "../../src/cli/paths.js";
import { SLUICE_NODE_FLAGS } from "../helpers/processes.js";

const root = projectRoot();
const read = (path: string) => readFileSync(join(root, path), "utf8");

test("every launcher gives Sluice the same Node flags", () => {
  const shebang = read("bin/sluice.js").split("\n")[0] ?? "";
  const m = /^#!\/usr\/bin\/env -S node((?: --\S+)*)$/.exec(shebang);
  assert.ok(m !== null, `bin/sluice.js's first line runs node with flags: ${shebang}`);
  assert.deepEqual(m[1]?.trim().split(" "), [...SLUICE_NODE_FLAGS], "bin/sluice.js");

  const entry = /^ENTRYPOINT (.+)$/m.exec(read("deploy/Containerfile"))?.[1];
  assert.ok(entry !== undefined, "deploy/Containerfile has an ENTRYPOINT");
  assert.deepEqual(JSON.parse(entry), ["node", ...SLUICE_NODE_FLAGS, "/app/bin/sluice.js"], "deploy/Containerfile");

  const run = read("scripts/quickstart.sh")
    .split("\n")
    .find((l) => l.includes("bin/sluice.js"));
  assert.equal(run?.split(" bin/sluice.js")[0], ["node", ...SLUICE_NODE_FLAGS].join(" "), "scripts/quickstart.sh");
});

test("the flags fix the young generation at 16 MiB in this Node", () => {
  const r = spawnSync(
    process.execPath,
    [
      ...SLUICE_NODE_FLAGS,
      "-e",
      "process.stdout.write(String(require('v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size))",
    ],
    { encoding: "utf8" },
  );
  assert.equal(r.status, 0, r.stderr);
  // Without the flags V8 starts the semi-space at 1 MiB and resizes it with the allocation rate.
  assert.equal(Number(r.stdout), 16 * 1024 * 1024);
});
